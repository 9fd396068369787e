"""The ready index gets the task id and a negated priority, so a refill can continue
after the last task it pushed (keyset) instead of re-reading the head of the index,
where claimed tasks leave dead entries until vacuum.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.execute("""
    CREATE INDEX tasks_ready_keyset ON tasks (source_id, (-priority), due_at, id)
        WHERE state IN ('PENDING', 'RETRY_WAIT');
    DROP INDEX IF EXISTS tasks_ready;
    """)


def downgrade() -> None:
    op.execute("""
    CREATE INDEX tasks_ready ON tasks (source_id, priority DESC, due_at)
        WHERE state IN ('PENDING', 'RETRY_WAIT');
    DROP INDEX IF EXISTS tasks_ready_keyset;
    """)
