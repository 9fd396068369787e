"""The records table: a cleaned record as a row, and the SQL that upserts a batch of them.

``record_keys`` keeps fingerprints unique across day partitions, so a record stays in the
day it was first seen (its ``crawled_at`` moves on when the same content is seen again).
Re-cleaning a staged page replaces the records that page produced before, so a rule fix
never leaves duplicates behind.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from psycopg import AsyncConnection

from stratacrawl.cold.pool import Db, connection

COLUMNS = ("source_id", "day", "fingerprint", "url", "canonical_url", "url_hash", "staging_id",
           "task_id", "trace_id", "crawled_at", "fields")


@dataclass(frozen=True)
class Record:
    source_id: str
    day: date
    fingerprint: str
    url: str
    canonical_url: str
    url_hash: str
    staging_id: int
    task_id: int | None
    trace_id: str | None
    crawled_at: datetime
    fields: dict[str, Any]

    def row(self) -> tuple[Any, ...]:
        return (self.source_id, self.day, self.fingerprint, self.url, self.canonical_url,
                self.url_hash, self.staging_id, self.task_id, self.trace_id, self.crawled_at,
                json.dumps(self.fields, ensure_ascii=False))


@dataclass
class UpsertResult:
    inserted: int = 0
    updated: int = 0
    replaced: int = 0       # records of re-cleaned pages that their new extraction superseded


async def ensure_partitions(db: Db,
                            keys: Iterable[tuple[str, date]]) -> None:
    """Create the record partitions of these (source, day) pairs that do not exist yet,
    each in a short transaction of its own. Never inside a landing transaction: creating
    a partition locks ``records`` whole, and a landing that already holds a lock on it
    (its inserts) while waiting for another's partition lock deadlocks with that one."""
    for source_id, day in sorted(set(keys)):
        async with connection(db) as conn:
            await conn.execute("SELECT sc_ensure_record_partition(%s, %s)", (source_id, day))


async def upsert(conn: AsyncConnection, records: Sequence[Record],
                 recleaned: Sequence[int] = ()) -> UpsertResult:
    """Land ``records`` in one transaction (the caller's); ``recleaned`` are staging ids seen
    before, whose earlier records go unless the new extraction produced them again. Their
    partitions must exist (:func:`ensure_partitions`)."""
    result = UpsertResult()
    await conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS clean_batch (source_id text, day date, fingerprint text, "
        "url text, canonical_url text, url_hash text, staging_id bigint, task_id bigint, "
        "trace_id text, crawled_at timestamptz, fields jsonb) ON COMMIT DELETE ROWS")
    if records:
        async with conn.cursor().copy(
                f"COPY clean_batch ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for r in records:
                await copy.write_row(r.row())
    if recleaned:
        cur = await conn.execute(
            "WITH gone AS (DELETE FROM records r WHERE r.staging_id = ANY(%b::bigint[]) AND NOT EXISTS "
            "(SELECT 1 FROM clean_batch b WHERE b.fingerprint = r.fingerprint) "
            "RETURNING r.fingerprint) "
            "DELETE FROM record_keys k USING gone WHERE k.fingerprint = gone.fingerprint",
            (list(recleaned),))
        result.replaced = cur.rowcount
    if not records:
        return result
    cur = await conn.execute(  # new keys = new records (partitioned tables hide xmax)
        "INSERT INTO record_keys (fingerprint, source_id, day) "
        "SELECT DISTINCT ON (fingerprint) fingerprint, source_id, day FROM clean_batch "
        "ORDER BY fingerprint, crawled_at ON CONFLICT (fingerprint) DO NOTHING")
    result.inserted = cur.rowcount
    cur = await conn.execute(
        "INSERT INTO records AS r (source_id, day, fingerprint, url, canonical_url, url_hash, "
        "  staging_id, task_id, trace_id, crawled_at, fields) "
        "SELECT DISTINCT ON (b.fingerprint) b.source_id, k.day, b.fingerprint, b.url, "
        "  b.canonical_url, b.url_hash, b.staging_id, b.task_id, b.trace_id, b.crawled_at, b.fields "
        "FROM clean_batch b JOIN record_keys k USING (fingerprint) "
        "ORDER BY b.fingerprint, b.crawled_at DESC "
        "ON CONFLICT (source_id, day, fingerprint) DO UPDATE SET "
        "  crawled_at = GREATEST(r.crawled_at, excluded.crawled_at), "
        "  staging_id = CASE WHEN excluded.crawled_at >= r.crawled_at THEN excluded.staging_id "
        "               ELSE r.staging_id END, "
        "  url = excluded.url, fields = excluded.fields, updated_at = now()")
    result.updated = cur.rowcount - result.inserted
    return result


@contextlib.asynccontextmanager
async def export_rows(db: Db, source_id: str, since: date,
                      until: date | None, skip: Sequence[date], chunk: int
                      ) -> AsyncIterator[AsyncIterator[list[tuple[Any, ...]]]]:
    """(source, canonical URL, crawled at, day, fingerprint, fields) of a source's records
    from ``since`` (to ``until``), less the days in ``skip``, ``chunk`` at a time, by day
    (a server-side cursor: any size, flat memory)."""
    async with connection(db) as conn, conn.transaction(), conn.cursor(name="export") as cur:
        await cur.execute(
            "SELECT source_id, canonical_url, crawled_at, day, fingerprint, fields FROM records "
            "WHERE source_id = %s AND day >= %s AND (%s::date IS NULL OR day <= %s) "
            "AND day <> ALL(%b::date[]) ORDER BY day, crawled_at",
            (source_id, since, until, until, list(skip)))

        async def chunks() -> AsyncIterator[list[tuple[Any, ...]]]:
            while rows := await cur.fetchmany(chunk):
                yield list(rows)

        yield chunks()


async def record_counts(db: Db) -> dict[str, int]:
    """Records per source."""
    async with connection(db) as conn:
        cur = await conn.execute("SELECT source_id, count(*) FROM records GROUP BY 1")
        return {str(s): int(n) for s, n in await cur.fetchall()}


# -- the records as Great Expectations reads them -----------------------------------------
# A source's query asset: its records as typed columns, one row per record, with a ``day``
# column the asset's batch definition partitions on (GX adds ``WHERE day = '<day>'``, which
# PostgreSQL pushes into the query: one source-day is read through the primary key). A day
# with no records still has a batch, one row of NULLs, so an empty day fails completeness
# and freshness instead of passing them vacuously. Columns: ``day``; ``record_url`` (the
# canonical URL); ``record_first_seen`` (when the record was first committed); per field
# its text (NULL when missing or empty) and for numbers and dates a typed twin,
# ``<field>__number`` / ``<field>__time`` (NULL when missing or malformed).
URL = "record_url"
FIRST_SEEN = "record_first_seen"
CALENDAR_DAYS = 3660      # empty days have a batch up to ten years back
NUMERIC = {"int", "float", "price"}
TEMPORAL = {"date", "datetime"}
NUMBER_RE = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
# ISO 8601 dates as the cleaner writes them (a date, or a date-time with an offset or Z);
# the month and day ranges keep the typed cast from failing on a malformed value.
DATE_RE = (r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
           r"([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]+)?)?"
           r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?$")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def number_column(name: str) -> str:
    return f"{name}__number"


def time_column(name: str) -> str:
    return f"{name}__time"


def field_columns(name: str, kind: str) -> list[str]:
    """The SQL of one record field: its text, and for numbers and dates its typed twin."""
    raw = f"NULLIF(btrim(fields->>{_literal(name)}), '')"
    columns = [f"{raw} AS {_ident(name)}"]
    if kind in NUMERIC:
        columns.append(f"CASE WHEN {raw} ~ {_literal(NUMBER_RE)} THEN ({raw})::float8 END "
                       f"AS {_ident(number_column(name))}")
    elif kind in TEMPORAL:
        columns.append(f"CASE WHEN {raw} ~ {_literal(DATE_RE)} THEN ({raw})::timestamptz END "
                       f"AS {_ident(time_column(name))}")
    return columns


def asset_query(source_id: str, field_types: dict[str, str]) -> str:
    """The query asset of a source whose records carry ``field_types`` (name → declared
    type). Literal SQL: a GX query asset takes no bind parameters; a source id is
    ``[a-z0-9_-]``, so quoting is safe."""
    sid = _literal(source_id)
    today = "(now() AT TIME ZONE 'UTC')::date"
    columns = ["day", URL, FIRST_SEEN]
    for name, kind in field_types.items():
        columns += field_columns(name, kind)
    return (f"SELECT {', '.join(columns)} FROM ("
            f"SELECT day, canonical_url AS {URL}, created_at AS {FIRST_SEEN}, fields "
            f"FROM records WHERE source_id = {sid} "
            f"UNION ALL SELECT d::date, NULL, NULL, NULL "
            f"FROM generate_series({today} - {CALENDAR_DAYS}, {today} + 1, interval '1 day') d "
            f"WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.source_id = {sid} "
            f"AND r.day = d::date)) AS source_days")
