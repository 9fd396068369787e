"""``staging.clean_state = 'unchanged'``: an item page fetched again with the body its last
fetch had. Its records came from that body already, so the cleaner does not claim it; a
re-clean after a rule fix (``clean --reclean``) takes it like any other page of its day.

Adding the constraint reads every staging partition once (row headers, not the bodies,
which live in TOAST) under a lock that holds writes back: seconds per million staged
pages.

Revision ID: 0024
Revises: 0023
"""

from alembic import op

revision = "0024"
down_revision = "0023"

_CHECK = "ALTER TABLE staging ADD CONSTRAINT staging_clean_state_check CHECK (clean_state IN ({}))"
_STATES = "'new', 'cleaned', 'format_error', 'skipped'"


def upgrade() -> None:
    op.execute("ALTER TABLE staging DROP CONSTRAINT staging_clean_state_check")
    op.execute(_CHECK.format(_STATES + ", 'unchanged'"))


def downgrade() -> None:
    op.execute("UPDATE staging SET clean_state = 'skipped' WHERE clean_state = 'unchanged'")
    op.execute("ALTER TABLE staging DROP CONSTRAINT staging_clean_state_check")
    op.execute(_CHECK.format(_STATES))
