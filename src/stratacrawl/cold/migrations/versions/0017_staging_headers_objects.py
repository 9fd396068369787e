"""Staged response headers are JSON objects.

The writer encoded a fetch's headers to JSON text once and copied that text into the
``headers`` jsonb column, where the driver encoded it a second time: every row held a JSON
string (``"{\\"content-type\\": …}"``) instead of the object, so ``headers->>'content-type'``
was NULL. Writers now pass the text through as is; this revision turns the strings already
stored back into the objects they spell.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"


def upgrade() -> None:
    op.execute("UPDATE staging SET headers = (headers #>> '{}')::jsonb "
               "WHERE jsonb_typeof(headers) = 'string'")


def downgrade() -> None:
    """Nothing to undo: objects are what the column was meant to hold."""
