"""Staging rows know their task kind; list pages carry a discovery watermark.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.execute("""
    ALTER TABLE staging ADD COLUMN kind text NOT NULL DEFAULT 'item';
    ALTER TABLE staging ADD COLUMN discovered_at timestamptz;
    CREATE INDEX staging_undiscovered ON staging (source_id, fetched_at)
        WHERE discovered_at IS NULL AND kind IN ('seed', 'list', 'sitemap');
    """)


def downgrade() -> None:
    op.execute("""
    DROP INDEX IF EXISTS staging_undiscovered;
    ALTER TABLE staging DROP COLUMN discovered_at;
    ALTER TABLE staging DROP COLUMN kind;
    """)
