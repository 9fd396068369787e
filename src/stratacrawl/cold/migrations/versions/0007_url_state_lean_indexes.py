"""Every fetch updates its URL-state row inside the staging transaction; an index no
query reads (``url_state_source``: source and last crawl) only made each of those
updates write one more index entry.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.execute("DROP INDEX IF EXISTS url_state_source")


def downgrade() -> None:
    op.execute("CREATE INDEX url_state_source ON url_state (source_id, last_crawled)")
