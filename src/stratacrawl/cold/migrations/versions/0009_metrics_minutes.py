"""Per-minute monitoring history: what the ops page charts over the last hours.

Hot keeps the live per-minute counters two hours; this table keeps them (plus the backlog
and ingest measured when the alert rules are evaluated) for the charts' 24 hours and
more (pruned after ``metrics_history_days``).

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE metrics_minutes (
            source_id      text        NOT NULL,
            minute         timestamptz NOT NULL,
            requests       integer,
            ok             integer,
            failed         integer,
            retries        integer,
            latency_ms_sum double precision,
            p99_ms         double precision,
            hot_backlog    bigint,
            ledger_backlog bigint,
            staged_per_min double precision,
            PRIMARY KEY (source_id, minute)
        )""")
    op.execute("CREATE INDEX metrics_minutes_minute ON metrics_minutes (minute)")


def downgrade() -> None:
    op.execute("DROP TABLE metrics_minutes")
