"""Page snapshots: staged pages of sources that ask for them outlive staging retention.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.execute("""
    CREATE TABLE page_snapshots (LIKE staging INCLUDING DEFAULTS);
    ALTER TABLE page_snapshots ADD PRIMARY KEY (fetch_key, fetched_at);
    CREATE INDEX page_snapshots_source ON page_snapshots (source_id, fetched_at);
    """)


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS page_snapshots")
