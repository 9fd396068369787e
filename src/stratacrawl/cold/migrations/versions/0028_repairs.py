"""Repairs of extraction rules: the proposals (``repair_proposals``: what was learned, the
``extract`` block it would write, and the decision on it) and every version of a source's
``extract`` block the platform wrote into the sources file (``extract_versions``), so a
repair can be looked back on and rolled back.

Revision ID: 0028
Revises: 0027
"""

from alembic import op

revision = "0028"
down_revision = "0027"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE repair_proposals (
            id          bigserial   PRIMARY KEY,
            source_id   text        NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            state       text        NOT NULL DEFAULT 'proposed'
                        CHECK (state IN ('proposed', 'approved', 'rejected', 'superseded')),
            proposal    jsonb       NOT NULL,
            extract     jsonb       NOT NULL,
            decided_at  timestamptz,
            decided_by  text,
            comment     text,
            version     integer
        )""")
    op.execute("CREATE INDEX repair_proposals_source ON repair_proposals (source_id, id)")
    op.execute("""
        CREATE TABLE extract_versions (
            source_id   text        NOT NULL,
            version     integer     NOT NULL,
            extract     jsonb       NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            reason      text        NOT NULL,
            PRIMARY KEY (source_id, version)
        )""")


def downgrade() -> None:
    op.execute("DROP TABLE extract_versions, repair_proposals")
