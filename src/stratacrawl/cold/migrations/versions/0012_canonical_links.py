"""rel=canonical as evidence for learned URL rules: each URL's declared canonical link (as
its last fetch had it), and per source how many of those the miner used or ignored
(pointing off the host, to a page that is missing, or in a loop).

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.execute("ALTER TABLE url_state ADD COLUMN canonical_url text")
    op.execute("""
        CREATE TABLE url_rule_canonicals (
            source_id  text        PRIMARY KEY,
            used       integer     NOT NULL DEFAULT 0,  -- pairs that were evidence
            off_host   integer     NOT NULL DEFAULT 0,  -- pointing to another host
            missing    integer     NOT NULL DEFAULT 0,  -- to a page that answered 4xx
            looped     integer     NOT NULL DEFAULT 0,  -- to a page declaring another canonical
            last_seen  timestamptz NOT NULL DEFAULT now()
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE url_rule_canonicals")
    op.execute("ALTER TABLE url_state DROP COLUMN canonical_url")
