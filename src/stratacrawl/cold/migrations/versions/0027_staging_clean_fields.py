"""``staging.clean_fields``: what the extraction rules did find on a page that is a format
error (a required field missing), so a check of the pages just cleaned sees which fields
a redesign took away, and which it left. NULL for every other page. A nullable column
without a default: no table rewrite.

Revision ID: 0027
Revises: 0026
"""

from alembic import op

revision = "0027"
down_revision = "0026"


def upgrade() -> None:
    op.execute("ALTER TABLE staging ADD COLUMN clean_fields jsonb")
    # page_snapshots keeps staging's columns in staging's order (retention copies rows
    # with SELECT *)
    op.execute("ALTER TABLE page_snapshots ADD COLUMN clean_fields jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE page_snapshots DROP COLUMN clean_fields")
    op.execute("ALTER TABLE staging DROP COLUMN clean_fields")
