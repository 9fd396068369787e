"""URL state by source (``url_state_source_id``): the URL-rules miner's first read of a
source (its newest fetched pages) scanned the whole table without it — at 100 M known
URLs a parallel sequential scan of ~40 GB per source, at every crawl start.

On ``source_id`` alone: a fetch's URL-state update changes no indexed column, so it
stays a heap-only (HOT) update, which is why the old ``(source_id, last_crawled)`` index
was dropped in 0007. Few distinct sources make it small (B-tree deduplication: ~7 bytes
per URL). Migrations run in a transaction, so the build holds writes to url_state for
its duration (minutes at 100 M URLs): on a large installation create it first with
``CREATE INDEX CONCURRENTLY url_state_source_id ON url_state (source_id)`` and the
upgrade finds it there.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS url_state_source_id ON url_state (source_id)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS url_state_source_id")
