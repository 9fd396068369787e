"""Schema v1: task ledger, URL state, staging (by day), records (by source and day),
sessions, validation results, and the partition helpers.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None

UPGRADE = r"""
CREATE TABLE tasks (
    id               bigserial PRIMARY KEY,
    source_id        text        NOT NULL,
    url              text        NOT NULL,              -- wire URL, as discovered
    url_hash         text        NOT NULL,              -- fingerprint of the canonical URL
    kind             text        NOT NULL DEFAULT 'item'
                     CHECK (kind IN ('seed', 'list', 'item', 'sitemap')),
    state            text        NOT NULL DEFAULT 'PENDING'
                     CHECK (state IN ('PENDING', 'LEASED', 'FETCHING', 'SUCCEEDED',
                                      'FAILED', 'RETRY_WAIT')),
    priority         smallint    NOT NULL DEFAULT 5,    -- higher first; urgent = 10
    due_at           timestamptz NOT NULL DEFAULT now(),
    attempts         integer     NOT NULL DEFAULT 0,
    depth            integer     NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_expires_at timestamptz,
    batch_id         text,
    last_status      integer,
    last_error       text,
    trace_id         text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    UNIQUE (source_id, url_hash)
);
CREATE INDEX tasks_ready ON tasks (source_id, priority DESC, due_at)
    WHERE state IN ('PENDING', 'RETRY_WAIT');
CREATE INDEX tasks_leased ON tasks (lease_expires_at) WHERE state IN ('LEASED', 'FETCHING');

CREATE TABLE url_state (
    url_hash        text PRIMARY KEY,
    source_id       text        NOT NULL,
    url             text        NOT NULL,
    etag            text,
    last_modified   text,
    content_hash    text,
    http_status     integer,
    title           text,
    content_length  integer,
    first_seen      timestamptz NOT NULL DEFAULT now(),
    last_crawled    timestamptz,
    retry_count     integer     NOT NULL DEFAULT 0,
    hits            integer     NOT NULL DEFAULT 0,
    last_access     timestamptz NOT NULL DEFAULT now(),
    warm_synced_at  timestamptz                        -- demotion watermark (backfill)
);
CREATE INDEX url_state_source ON url_state (source_id, last_crawled);
CREATE INDEX url_state_unsynced ON url_state (last_crawled)
    WHERE last_crawled IS NOT NULL AND (warm_synced_at IS NULL OR warm_synced_at < last_crawled);

CREATE TABLE staging (
    id            bigserial,
    fetched_at    timestamptz NOT NULL,
    fetch_key     text        NOT NULL,                -- one fetch = one key (idempotent loads)
    source_id     text        NOT NULL,
    task_id       bigint,
    attempt       integer     NOT NULL DEFAULT 1,
    url           text        NOT NULL,
    final_url     text,
    status        integer,
    headers       jsonb,
    content_type  text,
    body          bytea,
    body_encoding text        NOT NULL DEFAULT 'zstd',
    body_bytes    integer,
    elapsed_ms    real,
    trace_id      text,
    worker        text,
    clean_state   text        NOT NULL DEFAULT 'new'
                  CHECK (clean_state IN ('new', 'cleaned', 'format_error', 'skipped')),
    cleaned_at    timestamptz,
    clean_error   text,
    PRIMARY KEY (fetched_at, id),
    UNIQUE (fetch_key, fetched_at)
) PARTITION BY RANGE (fetched_at);
CREATE INDEX staging_uncleaned ON staging (source_id, fetched_at) WHERE clean_state = 'new';

CREATE TABLE records (
    source_id     text        NOT NULL,
    day           date        NOT NULL,
    fingerprint   text        NOT NULL,   -- source + canonical URL + content hash
    url           text        NOT NULL,
    canonical_url text        NOT NULL,
    url_hash      text        NOT NULL,
    staging_id    bigint,
    task_id       bigint,
    trace_id      text,
    crawled_at    timestamptz NOT NULL,
    fields        jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_id, day, fingerprint)
) PARTITION BY LIST (source_id);

-- Global uniqueness of fingerprints across partitions (a partitioned table's
-- unique keys must contain the partition keys).
CREATE TABLE record_keys (
    fingerprint text PRIMARY KEY,
    source_id   text NOT NULL,
    day         date NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    source_id    text        NOT NULL,
    session_id   text        NOT NULL,
    cookies      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    closed_at    timestamptz,
    PRIMARY KEY (source_id, session_id)
);

CREATE TABLE validation_results (
    id          bigserial PRIMARY KEY,
    run_id      text        NOT NULL,
    run_at      timestamptz NOT NULL DEFAULT now(),
    source_id   text        NOT NULL,
    day         date        NOT NULL,
    suite       text        NOT NULL,
    success     boolean     NOT NULL,
    statistics  jsonb       NOT NULL DEFAULT '{}'::jsonb,
    results     jsonb       NOT NULL DEFAULT '[]'::jsonb,
    data_docs   text
);
CREATE INDEX validation_results_by_day ON validation_results (source_id, day, run_at DESC);

-- Day partitions are created on demand by writers; the advisory lock makes
-- concurrent creators of the same partition safe.
CREATE FUNCTION sc_ensure_day_partition(parent text, d date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE name text := parent || '_' || to_char(d, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(name));
    IF to_regclass(quote_ident(name)) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       name, parent, d::timestamptz, (d + 1)::timestamptz);
    END IF;
    RETURN name;
END $$;

CREATE FUNCTION sc_ensure_record_partition(source text, d date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    src  text := 'records_' || replace(source, '-', '_');
    name text := src || '_' || to_char(d, 'YYYYMMDD');
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(src));
    IF to_regclass(quote_ident(src)) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF records FOR VALUES IN (%L)
                        PARTITION BY RANGE (day)', src, source);
    END IF;
    IF to_regclass(quote_ident(name)) IS NULL THEN
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       name, src, d, d + 1);
    END IF;
    RETURN name;
END $$;
"""

DOWNGRADE = """
DROP FUNCTION IF EXISTS sc_ensure_record_partition(text, date);
DROP FUNCTION IF EXISTS sc_ensure_day_partition(text, date);
DROP TABLE IF EXISTS validation_results, sessions, record_keys, records, staging,
    url_state, tasks CASCADE;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
