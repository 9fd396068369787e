"""The text encoding a cleaner read each staged page in (``staging.encoding``).

Found as a browser finds it (byte-order mark, Content-Type charset, ``<meta>`` prescan,
detector) when the page is cleaned; NULL for pages not cleaned yet, or cleaned before
this revision.

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    # page_snapshots keeps staging's columns in staging's order (retention copies rows
    # across with SELECT *)
    op.execute("ALTER TABLE staging ADD COLUMN encoding text")
    op.execute("ALTER TABLE page_snapshots ADD COLUMN encoding text")


def downgrade() -> None:
    op.execute("ALTER TABLE page_snapshots DROP COLUMN encoding")
    op.execute("ALTER TABLE staging DROP COLUMN encoding")
