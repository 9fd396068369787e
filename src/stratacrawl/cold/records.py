"""The records table: a cleaned record as a row, and the SQL that upserts a batch of them.

A record is an **item**: its source and canonical URL (``url_hash``: after redirects,
``rel=canonical`` and the source's URL rules), not the URL that reached it nor its
content. A later fetch of the item — a re-crawl, a variant URL, a moved URL redirecting
to it — updates its record in place: ``fingerprint`` (the content) and ``version`` (how
many contents it has had) change, ``day`` and ``created_at`` (first seen) stay.
``record_items`` keeps items unique across the day partitions and says which day holds
each. Re-cleaning a staged page replaces the records that page produced before, so a
rule fix never leaves duplicates behind.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from stratacrawl.cold.pool import Db, connection
from stratacrawl.urls import canonical_fingerprint

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
            "WITH gone AS (DELETE FROM records r WHERE r.staging_id = ANY(%b::bigint[]) "
            "AND NOT EXISTS (SELECT 1 FROM clean_batch b WHERE b.source_id = r.source_id "
            "AND b.url_hash = r.url_hash) RETURNING r.source_id, r.url_hash) "
            "DELETE FROM record_items k USING gone "
            "WHERE k.source_id = gone.source_id AND k.url_hash = gone.url_hash",
            (list(recleaned),))
        result.replaced = cur.rowcount
    if not records:
        return result
    # Both statements write in (source, URL hash) order, so landings side by side never
    # deadlock. A new item's day is that of its first fetch; a known one keeps its own.
    cur = await conn.execute(  # new items = new records (partitioned tables hide xmax)
        "INSERT INTO record_items (source_id, url_hash, day) "
        "SELECT DISTINCT ON (source_id, url_hash) source_id, url_hash, day FROM clean_batch "
        "ORDER BY source_id, url_hash, crawled_at ON CONFLICT (source_id, url_hash) DO NOTHING")
    result.inserted = cur.rowcount
    # The newest fetch of an item wins: an older page cleaned later (a re-clean of its day)
    # leaves a newer record as it is; a new content is a new version.
    cur = await conn.execute(
        "INSERT INTO records AS r (source_id, day, fingerprint, url, canonical_url, url_hash, "
        "  staging_id, task_id, trace_id, crawled_at, fields) "
        "SELECT DISTINCT ON (b.source_id, b.url_hash) b.source_id, k.day, b.fingerprint, "
        "  b.url, b.canonical_url, b.url_hash, b.staging_id, b.task_id, b.trace_id, "
        "  b.crawled_at, b.fields "
        "FROM clean_batch b JOIN record_items k USING (source_id, url_hash) "
        "ORDER BY b.source_id, b.url_hash, b.crawled_at DESC "
        "ON CONFLICT (source_id, day, url_hash) DO UPDATE SET "
        "  version = r.version + (r.fingerprint <> excluded.fingerprint)::int, "
        "  fingerprint = excluded.fingerprint, crawled_at = excluded.crawled_at, "
        "  staging_id = excluded.staging_id, task_id = excluded.task_id, "
        "  trace_id = excluded.trace_id, url = excluded.url, "
        "  canonical_url = excluded.canonical_url, fields = excluded.fields, "
        "  updated_at = now() "
        "WHERE excluded.crawled_at >= r.crawled_at")
    result.updated = cur.rowcount - result.inserted
    return result


# -- items a URL rule merges ----------------------------------------------------------
async def keyed_under(db: Db, source_ids: Sequence[str]) -> dict[str, list[str]]:
    """The URL rules (texts) each source's record keys were made under."""
    async with connection(db) as conn:
        cur = await conn.execute("SELECT source_id, rules FROM record_url_rules "
                                 "WHERE source_id = ANY(%b)", (list(source_ids),))
        return {str(s): list(r) for s, r in await cur.fetchall()}


async def rekey(db: Db, source_id: str, rules: Sequence[str], candidates: str,
                move: Callable[[str], str | None]) -> int:
    """Key a source's records under ``rules`` (texts): each record whose canonical URL
    matches ``candidates`` (a PostgreSQL regular expression, a cheap first look) and that
    ``move`` maps to another canonical URL becomes that item's, or is merged into it when
    it has a record already (the first day and ``created_at`` of the two, the newer
    content, their versions added). One transaction, one rekeying of a source at a time;
    returns the records moved or merged."""
    moved = 0
    async with connection(db) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('record_url_rules:' || %s))",
                           (source_id,))
        cur = await conn.execute("SELECT rules FROM record_url_rules WHERE source_id = %s",
                                 (source_id,))
        row = await cur.fetchone()
        if row is not None and sorted(row[0]) == sorted(rules):
            return 0      # another cleaner did it meanwhile
        cur = await conn.execute(
            "SELECT url_hash, canonical_url FROM records WHERE source_id = %s "
            "AND canonical_url ~ %s", (source_id, candidates))
        for url_hash, canonical in await cur.fetchall():
            target = move(canonical)
            if target is not None and target != canonical:
                await _merge(conn, source_id, url_hash, target)
                moved += 1
        await conn.execute(
            "INSERT INTO record_url_rules (source_id, rules) VALUES (%s, %s) "
            "ON CONFLICT (source_id) DO UPDATE SET rules = excluded.rules, applied_at = now()",
            (source_id, sorted(rules)))
    return moved


_ITEM = ("day, fingerprint, url, canonical_url, url_hash, staging_id, task_id, trace_id, "
         "crawled_at, fields, created_at, version")


async def _merge(conn: AsyncConnection, source_id: str, url_hash: str, canonical: str) -> None:
    """The record of ``url_hash`` as the item of ``canonical``: moved there, or merged with
    that item's record; inside :func:`rekey`'s transaction."""
    target_hash = canonical_fingerprint(canonical)
    # rows locked in key order, as landings write them: the two never deadlock
    await conn.execute("SELECT 1 FROM records WHERE source_id = %s AND url_hash = ANY(%s) "
                       "ORDER BY url_hash FOR UPDATE", (source_id, [url_hash, target_hash]))
    cur = await conn.execute(
        f"DELETE FROM records WHERE source_id = %s AND url_hash = ANY(%s) RETURNING {_ITEM}",
        (source_id, [url_hash, target_hash]))
    rows = [dict(zip(_ITEM.split(", "), r, strict=True)) for r in await cur.fetchall()]
    await conn.execute("DELETE FROM record_items WHERE source_id = %s AND url_hash = ANY(%s)",
                       (source_id, [url_hash, target_hash]))
    if not rows:
        return
    newest = max(rows, key=lambda r: r["crawled_at"])
    first = min(rows, key=lambda r: (r["day"], r["created_at"]))
    merged = {**newest, "day": first["day"], "created_at": first["created_at"],
              "canonical_url": canonical, "url_hash": target_hash,
              "version": sum(r["version"] for r in rows), "fields": Jsonb(newest["fields"])}
    await conn.execute(
        f"INSERT INTO records (source_id, {_ITEM}, updated_at) "
        f"VALUES (%s, {', '.join(['%s'] * len(merged))}, now())",
        (source_id, *[merged[k] for k in _ITEM.split(", ")]))
    await conn.execute("INSERT INTO record_items (source_id, url_hash, day, created_at) "
                       "VALUES (%s, %s, %s, %s)",
                       (source_id, target_hash, merged["day"], merged["created_at"]))


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


async def window_rows(db: Db, source_id: str, field_types: dict[str, str],
                      url_hashes: Sequence[str], errors: Sequence[tuple[datetime, int]]
                      ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(columns, rows) of pages just cleaned, as the source's query asset has them (its
    field columns, the same SQL): the records of these items, and the staged pages of
    ``errors`` (fetched at, id) that were format errors, with the fields the rules did
    find (``staging.clean_fields``; none for a page that yielded nothing). Plus each
    page's URL and trace id (``page_url``, ``trace_id``), to name samples."""
    columns = [URL, "page_url", "trace_id"]
    for name, kind in field_types.items():
        columns += field_columns(name, kind)
    async with connection(db) as conn:
        cur = await conn.execute(
            f"SELECT {', '.join(columns)} FROM ("
            "SELECT r.canonical_url AS record_url, r.url AS page_url, r.trace_id, r.fields "
            "FROM record_items k JOIN records r USING (source_id, day, url_hash) "
            "WHERE k.source_id = %s AND k.url_hash = ANY(%b::text[]) "
            "UNION ALL SELECT NULL, coalesce(s.final_url, s.url), s.trace_id, "
            "coalesce(s.clean_fields, '{}'::jsonb) "
            "FROM unnest(%b::timestamptz[], %b::bigint[]) AS e(fetched_at, id) "
            "JOIN staging s ON s.fetched_at = e.fetched_at AND s.id = e.id "
            "WHERE s.clean_state = 'format_error') AS w",
            (source_id, list(url_hashes), [e[0] for e in errors], [e[1] for e in errors]))
        names = [d.name for d in cur.description or ()]
        return names, list(await cur.fetchall())


async def known_good(db: Db, source_id: str, required: Sequence[str], limit: int
                     ) -> list[tuple[str, str, dict[str, Any]]]:
    """(canonical URL, URL fetched, fields) of up to ``limit`` of the source's records that
    hold every ``required`` field, newest first: items whose values are known."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT canonical_url, url, fields FROM records WHERE source_id = %s "
            "AND fields ?& %s::text[] ORDER BY crawled_at DESC LIMIT %s",
            (source_id, list(required), limit))
        return [(str(c), str(u), dict(f)) for c, u, f in await cur.fetchall()]
