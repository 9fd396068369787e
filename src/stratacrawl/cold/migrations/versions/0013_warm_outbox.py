"""The "not yet in warm" watermark becomes an append-only outbox, so a fetch's URL-state
update is a HOT update.

Every fetch updates its URL-state row inside the staging transaction. A partial index over
the rows whose last crawl is newer than their warm copy (``url_state_unsynced``) covered
``last_crawled``, so each of those updates wrote a new row version elsewhere plus an entry
in that index and in the primary key. Now the staging transaction appends the URL's hash
to ``warm_outbox`` (one append to a narrow table, one entry at the end of a bigint key)
and the demoter consumes it; no index covers a column the fetch writes, and with free
room left on each page (fillfactor) PostgreSQL updates the row in place (HOT): no index
entries at all. ``warm_synced_at`` stays as the record of what warm holds (recovery counts
it per week).

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    op.execute("""
        CREATE TABLE warm_outbox (
            id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            url_hash text NOT NULL
        )""")
    op.execute("""
        INSERT INTO warm_outbox (url_hash) SELECT url_hash FROM url_state
        WHERE last_crawled IS NOT NULL
          AND (warm_synced_at IS NULL OR warm_synced_at < last_crawled)
        ORDER BY last_crawled""")
    op.execute("DROP INDEX IF EXISTS url_state_unsynced")
    op.execute("ALTER TABLE url_state SET (fillfactor = 70)")


def downgrade() -> None:
    op.execute("ALTER TABLE url_state RESET (fillfactor)")
    op.execute("""
        CREATE INDEX url_state_unsynced ON url_state (last_crawled)
        WHERE last_crawled IS NOT NULL AND (warm_synced_at IS NULL OR warm_synced_at < last_crawled)""")
    op.execute("DROP TABLE warm_outbox")
