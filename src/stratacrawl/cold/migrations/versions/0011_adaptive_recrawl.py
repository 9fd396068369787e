"""Adaptive re-crawl: each recurring task (a list page, or an item its source re-crawls)
keeps its own re-crawl interval and its change history in the ledger.

``recrawl_s`` is NULL until the first successful fetch; ``revisits`` counts the fetches
after the first whose change could be told (a 304, or a content fingerprint to compare),
``changes`` those that found the page changed, ``changed_at`` the last of them. None of
these columns is in an index, so updating them does not stop an update being HOT.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.execute("""
        ALTER TABLE tasks
            ADD COLUMN recrawl_s  real,
            ADD COLUMN revisits   integer NOT NULL DEFAULT 0,
            ADD COLUMN changes    integer NOT NULL DEFAULT 0,
            ADD COLUMN changed_at timestamptz""")


def downgrade() -> None:
    op.execute("ALTER TABLE tasks DROP COLUMN recrawl_s, DROP COLUMN revisits, "
               "DROP COLUMN changes, DROP COLUMN changed_at")
