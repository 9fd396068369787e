"""Each crawl run holds a session-level advisory lock while it lives.

``lock_key`` is the key of the lock (NULL for runs of versions that took none: only their
heartbeat tells whether they live). PostgreSQL releases a session's advisory locks the
moment its connection ends — a killed process's too — so a run whose lock nobody holds is
known dead at once, instead of after its heartbeat went stale (15 s).

Revision ID: 0019
Revises: 0018
"""

from alembic import op

revision = "0019"
down_revision = "0018"


def upgrade() -> None:
    op.execute("ALTER TABLE crawl_runs ADD COLUMN lock_key bigint")


def downgrade() -> None:
    op.execute("ALTER TABLE crawl_runs DROP COLUMN lock_key")
