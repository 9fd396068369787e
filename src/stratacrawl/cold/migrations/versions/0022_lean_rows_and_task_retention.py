"""Leaner rows per known URL: its ``url_state`` row, and its task only while it matters.

- ``title`` is dropped: nothing wrote it (page titles are record fields, cleaned from the
  staged page).
- ``canonical_url`` is the empty string when a page declares itself canonical (most
  do): the URL is not stored twice. Readers take ``''`` as the row's own URL; rows
  written before keep the URL until their next fetch.
- ``tasks_finished_items``: finished item tasks by finish time, for the ledger's
  retention (sinking deletes those finished longer than the staging retention ago, with
  their ``task_keys``; the URL's state stays in ``url_state``). A task row and its key
  are ~400 bytes: kept for ever they were half a crawled URL's cost in cold. The index
holds only the finished items not retired yet. On a large installation create it first
with ``CREATE INDEX CONCURRENTLY`` (the same definition) and the upgrade finds it there.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

# (as ``cold.ledger.FINISHED_ITEM``, which the retention's query must match to use it)
FINISHED_ITEM = "kind = 'item' AND state IN ('SUCCEEDED', 'FAILED', 'REDUNDANT')"
revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    op.execute("ALTER TABLE url_state DROP COLUMN IF EXISTS title")
    op.execute(f"CREATE INDEX IF NOT EXISTS tasks_finished_items ON tasks (finished_at) "
               f"WHERE {FINISHED_ITEM}")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS tasks_finished_items")
    op.execute("ALTER TABLE url_state ADD COLUMN title text")
    op.execute("UPDATE url_state SET canonical_url = url WHERE canonical_url = ''")
