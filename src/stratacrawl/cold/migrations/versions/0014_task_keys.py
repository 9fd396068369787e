"""A task's identity (source, URL fingerprint) moves to its own insert-only table, so the
ledger's frequent updates no longer maintain an index over it.

A fetch updates its task row three times (claim, fetching, outcome), and none of those
updates can be HOT (the state is in the ready and lease indexes' predicates): each wrote
an entry into every index of ``tasks``, and the unique (source, URL fingerprint) index
was the costliest of them (measured: an outcome update of 20,000 tasks took about twice
as long with it). ``task_keys`` holds that uniqueness instead and is written once per
task, when it is queued. Re-arming recurring pages (per source, each discovery round)
gets a small partial index of its own.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE task_keys (
            source_id text   NOT NULL,
            url_hash  text   NOT NULL,
            task_id   bigint NOT NULL,
            PRIMARY KEY (source_id, url_hash)
        )""")
    op.execute("INSERT INTO task_keys SELECT source_id, url_hash, id FROM tasks")
    op.execute("ALTER TABLE tasks DROP CONSTRAINT tasks_source_id_url_hash_key")
    op.execute("""
        CREATE INDEX tasks_finished_lists ON tasks (source_id)
        WHERE kind IN ('seed', 'list', 'sitemap') AND state IN ('SUCCEEDED', 'FAILED')""")


def downgrade() -> None:
    op.execute("DROP INDEX tasks_finished_lists")
    op.execute("ALTER TABLE tasks ADD CONSTRAINT tasks_source_id_url_hash_key "
               "UNIQUE (source_id, url_hash)")
    op.execute("DROP TABLE task_keys")
