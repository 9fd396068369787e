"""The warm outbox says which crawl process's staging flush wrote each entry (``writer``:
its run id), so the URL-rule miner of that process skips the entries of its own pages —
it took each of them into its sample in memory at fetch time, and reading them back (a
join of every page to ``url_state``) and adding them again was its largest cost while
the crawl ran. Entries of other processes, and those written before (``writer`` NULL),
are read as before. A nullable column without a default: no table rewrite.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"


def upgrade() -> None:
    op.execute("ALTER TABLE warm_outbox ADD COLUMN writer text")


def downgrade() -> None:
    op.execute("ALTER TABLE warm_outbox DROP COLUMN writer")
