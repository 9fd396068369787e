"""Monitoring: alert levels (P0-P3), anomaly snapshots linked from alerts, weekly
inspection reports (table sizes kept for growth and disk forecasts).

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.execute("""
    ALTER TABLE alerts ADD COLUMN level text CHECK (level IN ('P0', 'P1', 'P2', 'P3'));
    CREATE TABLE alert_snapshots (
        id           bigserial PRIMARY KEY,
        taken_at     timestamptz NOT NULL DEFAULT now(),
        alert_id     bigint REFERENCES alerts (id) ON DELETE CASCADE,
        source_id    text,
        active_tasks jsonb NOT NULL DEFAULT '[]'::jsonb,
        pool_states  jsonb NOT NULL DEFAULT '{}'::jsonb,
        queues       jsonb NOT NULL DEFAULT '{}'::jsonb,
        last_errors  jsonb NOT NULL DEFAULT '[]'::jsonb
    );
    ALTER TABLE alerts ADD COLUMN snapshot_id bigint;
    CREATE TABLE inspection_reports (
        id          bigserial PRIMARY KEY,
        made_at     timestamptz NOT NULL DEFAULT now(),
        table_bytes jsonb NOT NULL,
        report      text NOT NULL
    );
    """)


def downgrade() -> None:
    op.execute("""
    DROP TABLE IF EXISTS inspection_reports;
    DROP TABLE IF EXISTS alert_snapshots;
    ALTER TABLE alerts DROP COLUMN IF EXISTS snapshot_id;
    ALTER TABLE alerts DROP COLUMN IF EXISTS level;
    """)
