"""The warm outbox takes one entry per staging flush and source, holding the URL hashes
of that flush, instead of one entry per fetched URL.

The staging transaction appended a row per successful fetch to ``warm_outbox``: an insert
into the table, its key and its (source, id) index for every page (about a tenth of the
transaction's time, measured), and the demoter deleted as many rows again. A flush of
1,000 pages from 20 sources now appends 20 rows; the demoter and the URL-rule miner read
an entry's hashes with ``unnest``. Entries already queued become entries of one hash.

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    op.execute("ALTER TABLE warm_outbox ADD COLUMN url_hashes text[]")
    op.execute("UPDATE warm_outbox SET url_hashes = ARRAY[url_hash]")
    op.execute("ALTER TABLE warm_outbox DROP COLUMN url_hash, "
               "ALTER COLUMN url_hashes SET NOT NULL, "
               "ADD CONSTRAINT warm_outbox_not_empty CHECK (cardinality(url_hashes) > 0)")


def downgrade() -> None:
    op.execute("ALTER TABLE warm_outbox ADD COLUMN url_hash text, "
               "DROP CONSTRAINT warm_outbox_not_empty, ALTER COLUMN url_hashes DROP NOT NULL")
    op.execute("INSERT INTO warm_outbox (url_hash, source_id) SELECT h, o.source_id "
               "FROM warm_outbox o, unnest(o.url_hashes) WITH ORDINALITY AS x(h, n) "
               "WHERE o.url_hash IS NULL ORDER BY o.id, x.n")
    op.execute("DELETE FROM warm_outbox WHERE url_hash IS NULL")
    op.execute("ALTER TABLE warm_outbox DROP COLUMN url_hashes, "
               "ALTER COLUMN url_hash SET NOT NULL")
