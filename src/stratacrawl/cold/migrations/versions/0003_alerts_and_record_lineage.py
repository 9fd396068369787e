"""Alerts (format anomalies, failed checks) and the record → staging lineage index.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.execute("""
    CREATE TABLE alerts (
        id          bigserial PRIMARY KEY,
        raised_at   timestamptz NOT NULL DEFAULT now(),
        kind        text        NOT NULL,      -- format_anomaly, validation_failed, ...
        source_id   text,
        severity    text        NOT NULL DEFAULT 'warning'
                    CHECK (severity IN ('info', 'warning', 'critical')),
        message     text        NOT NULL,
        details     jsonb       NOT NULL DEFAULT '{}'::jsonb,
        resolved_at timestamptz
    );
    CREATE INDEX alerts_open ON alerts (kind, source_id, raised_at DESC) WHERE resolved_at IS NULL;
    -- re-cleaning a staged page replaces the records it produced before
    CREATE INDEX records_staging ON records (staging_id);
    """)


def downgrade() -> None:
    op.execute("""
    DROP INDEX IF EXISTS records_staging;
    DROP TABLE IF EXISTS alerts;
    """)
