"""Ensuring a partition that exists takes no lock.

Writers call ``sc_ensure_day_partition`` / ``sc_ensure_record_partition`` before landing
rows, and both took a transaction-level advisory lock first, held until the caller's
commit. Every cleaner batch ensures its source's record partition inside the transaction
that lands the batch, so two cleaner processes cleaning one source queued on that lock:
one process's landing waited for the other's whole remaining transaction (sampled
during a two-process run: a third of the cleaners' PostgreSQL time was spent waiting
on it, and one process sat idle a third of the time). Now the function looks for the
partition first and returns at once when it is there; only a writer that may have to
create it takes the lock. Another writer may have created it while this one waited, and
a second look would not see it (the catalog as this transaction last read it), so the
creation itself tells: "already exists" means done.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

revision = "0016"
down_revision = "0015"

_DAY = """
CREATE OR REPLACE FUNCTION sc_ensure_day_partition(parent text, d date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE name text := parent || '_' || to_char(d, 'YYYYMMDD');
BEGIN
    IF to_regclass(quote_ident(name)) IS NOT NULL THEN
        RETURN name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext(name));
    BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       name, parent, d::timestamptz, (d + 1)::timestamptz);
    EXCEPTION WHEN duplicate_table THEN
        NULL;  -- created by a writer this one waited for
    END;
    RETURN name;
END $$;
"""

_RECORD = """
CREATE OR REPLACE FUNCTION sc_ensure_record_partition(source text, d date) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    src  text := 'records_' || replace(source, '-', '_');
    name text := src || '_' || to_char(d, 'YYYYMMDD');
BEGIN
    IF to_regclass(quote_ident(name)) IS NOT NULL THEN
        RETURN name;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext(src));
    BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF records FOR VALUES IN (%L)
                        PARTITION BY RANGE (day)', src, source);
    EXCEPTION WHEN duplicate_table THEN
        NULL;  -- the source's partition exists
    END;
    BEGIN
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       name, src, d, d + 1);
    EXCEPTION WHEN duplicate_table THEN
        NULL;  -- created by a writer this one waited for
    END;
    RETURN name;
END $$;
"""

# The functions as revision 0001 created them.
_DAY_BEFORE = """
CREATE OR REPLACE FUNCTION sc_ensure_day_partition(parent text, d date) RETURNS text
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
"""

_RECORD_BEFORE = """
CREATE OR REPLACE FUNCTION sc_ensure_record_partition(source text, d date) RETURNS text
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


def upgrade() -> None:
    op.execute(_DAY)
    op.execute(_RECORD)


def downgrade() -> None:
    op.execute(_DAY_BEFORE)
    op.execute(_RECORD_BEFORE)
