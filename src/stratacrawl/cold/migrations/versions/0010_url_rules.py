"""Learned URL equivalence rules per source: which URL variants of a source serve the same
page (a query parameter that changes nothing, a trailing slash, the case of the path), with
the evidence for and against each, so that the crawler stops fetching them.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE url_rules (
            source_id       text        NOT NULL,
            rule            text        NOT NULL,   -- e.g. drop-param:ref@/article/
            state           text        NOT NULL DEFAULT 'candidate'
                            CHECK (state IN ('candidate', 'active', 'revoked')),
            support         integer     NOT NULL DEFAULT 0,  -- URL pairs it explains
            counterexamples integer     NOT NULL DEFAULT 0,  -- URL pairs it would merge wrongly
            example         text,                            -- one confirming pair
            first_seen      timestamptz NOT NULL DEFAULT now(),
            last_seen       timestamptz NOT NULL DEFAULT now(),
            revoked_at      timestamptz,
            PRIMARY KEY (source_id, rule)
        )""")
    op.execute("ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_state_check")
    op.execute("""ALTER TABLE tasks ADD CONSTRAINT tasks_state_check CHECK (state IN
        ('PENDING', 'LEASED', 'FETCHING', 'SUCCEEDED', 'FAILED', 'RETRY_WAIT', 'REDUNDANT'))""")


def downgrade() -> None:
    op.execute("UPDATE tasks SET state = 'SUCCEEDED' WHERE state = 'REDUNDANT'")
    op.execute("ALTER TABLE tasks DROP CONSTRAINT IF EXISTS tasks_state_check")
    op.execute("""ALTER TABLE tasks ADD CONSTRAINT tasks_state_check CHECK (state IN
        ('PENDING', 'LEASED', 'FETCHING', 'SUCCEEDED', 'FAILED', 'RETRY_WAIT'))""")
    op.execute("DROP TABLE url_rules")
