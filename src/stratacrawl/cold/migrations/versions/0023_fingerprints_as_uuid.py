"""URL and content fingerprints as ``uuid`` (16 bytes) instead of 32-character hex text.

A known URL's row carries two fingerprints (its URL's and its last page's), its primary
key and its task's key one more each: at 33 bytes a ``text`` value against 16 for a
``uuid``, ~80 bytes a known URL (measured at 1 M URLs: 463 → 382 bytes with compact
indexes). The program keeps seeing hex strings (``stratacrawl.cold.fingerprints``).

Each ``ALTER ... TYPE`` rewrites its table and rebuilds its indexes under an exclusive
lock: minutes per 10 M URLs, during which crawls wait. On a large installation run it in
a maintenance window (or build the new tables beside the old ones and swap them).

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"

COLUMNS = (("url_state", "url_hash"), ("url_state", "content_hash"), ("tasks", "url_hash"),
           ("task_keys", "url_hash"))


def upgrade() -> None:
    op.execute("ALTER TABLE url_state ALTER url_hash TYPE uuid USING url_hash::uuid, "
               "ALTER content_hash TYPE uuid USING content_hash::uuid")
    op.execute("ALTER TABLE tasks ALTER url_hash TYPE uuid USING url_hash::uuid")
    op.execute("ALTER TABLE task_keys ALTER url_hash TYPE uuid USING url_hash::uuid")
    op.execute("ALTER TABLE warm_outbox ALTER url_hashes TYPE uuid[] USING url_hashes::uuid[]")


def downgrade() -> None:
    for table, column in COLUMNS:
        op.execute(f"ALTER TABLE {table} ALTER {column} TYPE text "
                   f"USING replace({column}::text, '-', '')")
    op.execute("ALTER TABLE warm_outbox ALTER url_hashes TYPE text[] USING "
               "string_to_array(replace(array_to_string(url_hashes, ','), '-', ''), ',')")
