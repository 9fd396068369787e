"""Crawl runs: one row per crawl process, its heartbeat kept by its lease upkeep.

Leases belong to a run (a process), not to a worker name: a run killed with SIGKILL stops
beating, and every other run reclaims its leases within seconds of its heartbeat going
stale — also a new run that reuses the dead one's ``--worker-id``.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE crawl_runs (
            run_id       text PRIMARY KEY,
            worker       text NOT NULL,
            host         text NOT NULL,
            pid          integer NOT NULL,
            started_at   timestamptz NOT NULL DEFAULT now(),
            heartbeat_at timestamptz NOT NULL DEFAULT now(),
            ended_at     timestamptz
        )""")
    op.execute("CREATE INDEX crawl_runs_heartbeat ON crawl_runs (heartbeat_at)")


def downgrade() -> None:
    op.execute("DROP TABLE crawl_runs")
