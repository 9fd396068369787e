"""One record per item: a record is identified by its source and canonical URL (``url_hash``,
after redirects, ``rel=canonical`` and the source's URL rules), not by its content.

Before, a record's key was its content fingerprint, so the same item fetched again with
changed content — a re-crawl, or a moved URL redirecting to it — became a second record.
Now a later fetch updates the item's record in place: its ``fingerprint`` (the content)
and ``version`` (how many contents it has had) change, its ``day`` and ``created_at``
(first seen) stay.

``records`` is partitioned by source and day, and a unique key of a partitioned table
must hold the partition keys, so ``record_items`` (source, URL hash → the day partition
holding the record) keeps items unique across days, as ``record_keys`` kept fingerprints.

``record_url_rules`` holds, per source, the URL rules its records' keys were made under:
when the source's rules change, its records whose canonical URL a rule now rewrites are
moved to (or merged into) the item the rule names (``cold/records.py``).

Existing duplicates are merged: per item the row of its first day stays, with the newest
row's content, ``version`` = the number of rows merged, and the earliest ``created_at``.

Revision ID: 0026
Revises: 0025
"""

from alembic import op

revision = "0026"
down_revision = "0025"


def upgrade() -> None:
    op.execute("ALTER TABLE records ADD COLUMN version integer NOT NULL DEFAULT 1")
    # per duplicated item: how many rows, the first seen, and the row of its first day
    op.execute("""
        CREATE TEMP TABLE record_merge AS
        SELECT source_id, url_hash, count(*)::int AS n, min(created_at) AS first_created,
               (array_agg(day ORDER BY day, created_at))[1] AS keep_day,
               (array_agg(fingerprint ORDER BY day, created_at))[1] AS keep_fp
        FROM records GROUP BY source_id, url_hash HAVING count(*) > 1""")
    # and its newest content
    op.execute("""
        CREATE TEMP TABLE record_newest AS
        SELECT DISTINCT ON (r.source_id, r.url_hash) r.source_id, r.url_hash, r.fingerprint,
               r.url, r.canonical_url, r.staging_id, r.task_id, r.trace_id, r.crawled_at,
               r.fields
        FROM records r JOIN record_merge m USING (source_id, url_hash)
        ORDER BY r.source_id, r.url_hash, r.crawled_at DESC, r.day DESC""")
    op.execute("""
        DELETE FROM records r USING record_merge m
        WHERE r.source_id = m.source_id AND r.url_hash = m.url_hash
          AND (r.day, r.fingerprint) <> (m.keep_day, m.keep_fp)""")
    op.execute("""
        UPDATE records r SET fingerprint = w.fingerprint, url = w.url,
               canonical_url = w.canonical_url, staging_id = w.staging_id,
               task_id = w.task_id, trace_id = w.trace_id, crawled_at = w.crawled_at,
               fields = w.fields, version = m.n, created_at = m.first_created,
               updated_at = now()
        FROM record_merge m JOIN record_newest w USING (source_id, url_hash)
        WHERE r.source_id = m.source_id AND r.day = m.keep_day AND r.fingerprint = m.keep_fp""")
    op.execute("DROP TABLE record_newest, record_merge")
    op.execute("ALTER TABLE records DROP CONSTRAINT records_pkey")
    op.execute("ALTER TABLE records ADD PRIMARY KEY (source_id, day, url_hash)")
    op.execute("""
        CREATE TABLE record_items (
            source_id  text        NOT NULL,
            url_hash   text        NOT NULL,
            day        date        NOT NULL,   -- the day partition holding the record
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (source_id, url_hash)
        )""")
    op.execute("INSERT INTO record_items (source_id, url_hash, day, created_at) "
               "SELECT source_id, url_hash, day, created_at FROM records")
    op.execute("DROP TABLE record_keys")
    op.execute("""
        CREATE TABLE record_url_rules (
            source_id  text        PRIMARY KEY,
            rules      text[]      NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )""")


def downgrade() -> None:
    op.execute("""
        CREATE TABLE record_keys (
            fingerprint text PRIMARY KEY,
            source_id   text NOT NULL,
            day         date NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now()
        )""")
    op.execute("INSERT INTO record_keys (fingerprint, source_id, day, created_at) "
               "SELECT fingerprint, source_id, day, created_at FROM records "
               "ON CONFLICT (fingerprint) DO NOTHING")
    op.execute("DROP TABLE record_items, record_url_rules")
    op.execute("ALTER TABLE records DROP CONSTRAINT records_pkey")
    op.execute("ALTER TABLE records ADD PRIMARY KEY (source_id, day, fingerprint)")
    op.execute("ALTER TABLE records DROP COLUMN version")
