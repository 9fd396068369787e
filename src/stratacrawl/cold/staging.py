"""The staging table: a fetched page as a staging row, the SQL that lands rows with their
ledger updates, and the queues discovery and cleaning read from it.

All staging SQL lives here: the writer (normal path) and the spool loader (after an
outage) call the same ``land`` with ``idempotent`` set for replays.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

import zstandard
from psycopg import AsyncConnection, AsyncCursor
from psycopg.types.json import set_json_dumps

from stratacrawl.cold.ledger import HELD_BY, OUTCOME_ASSIGNMENTS
from stratacrawl.cold.pool import Db, connection
from stratacrawl.cold.tasks import LISTS, LISTS_SQL, Outcome, TaskState

COLUMNS = ("fetched_at", "fetch_key", "source_id", "task_id", "attempt", "url", "final_url",
           "status", "headers", "content_type", "body", "body_encoding", "body_bytes",
           "elapsed_ms", "trace_id", "worker", "kind", "clean_state", "discovered_at")
TYPES = ("timestamptz", "text", "text", "int8", "int4", "text", "text", "int4", "jsonb", "text",
         "bytea", "text", "int4", "float4", "text", "text", "text", "text", "timestamptz")
_ZSTD = zstandard.ZstdCompressor(level=1)
_UNZSTD = zstandard.ZstdDecompressor()
_STATES = {s.value: s for s in TaskState}  # outcome states: members, or strings from the spool
# How a staged body is stored (``staging.body_encoding``): each reader decodes by the
# row's own value, so rows written in another codec stay readable.
BODY_DECODERS: dict[str, Callable[[bytes], bytes]] = {"zstd": _UNZSTD.decompress,
                                                      "identity": bytes}


def decode_body(body: bytes | None, encoding: str) -> bytes:
    """A staged body as fetched (decoded), by its row's ``body_encoding``."""
    if not body:
        return b""
    try:
        return BODY_DECODERS[encoding](body)
    except KeyError:
        raise ValueError(f"staged body in unknown encoding {encoding!r}") from None


@dataclass
class StagedFetch:
    """One fetch on its way to staging, with what it means for the ledger and URL state."""

    row: tuple[Any, ...] | None          # in COLUMNS order; None: no response to stage
    outcome: Outcome  # a plain tuple of the same shape in older spool files
    url_hash: str
    content_hash: str | None
    etag: str | None
    last_modified: str | None
    succeeded: bool

    fetched_at: datetime
    status: int | None = None
    body_bytes: int = 0
    canonical_url: str | None = None     # the page's <link rel=canonical>, absolute
    attempt: int | None = None  # the claim it was fetched under (None: an older spool file)


def copy_encoded_json(cursor: AsyncCursor[Any]) -> None:
    """A row carries its ``headers`` as JSON text, encoded once when the row is made (the
    spool keeps the row as is): on ``cursor``, a jsonb column of a COPY takes that text
    unchanged. psycopg would otherwise encode the text again, storing a JSON string
    instead of the headers object."""
    set_json_dumps(_as_encoded, cursor)


def _as_encoded(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"a staging row's headers are JSON text, not {type(text).__name__}")
    return text


def to_discover(success: bool, kind: str, body: bytes, same_as_last: bool) -> bool:
    """Whether a fetch is a page whose links discovery must read: a seed, list or
    sitemap page that answered with a body its last fetch did not have."""
    return bool(success and kind in LISTS and body and not same_as_last)


def clean_state_of(success: bool, kind: str, body: bytes, same_as_last: bool) -> str:
    """A new staging row's ``clean_state`` (see :func:`make_row`)."""
    if not (success and kind == "item" and body):
        return "skipped"
    return "unchanged" if same_as_last else "new"


def make_row(*, fetched_at: datetime, fetch_key: str, source_id: str, task_id: int,
             attempt: int, url: str, final_url: str | None, status: int | None,
             headers: dict[str, str], content_type: str | None, body: bytes,
             elapsed_ms: float, trace_id: str, worker: str, kind: str,
             success: bool, same_as_last: bool = False,
             discovered: bool = False) -> tuple[Any, ...]:
    """A staging row; the body is stored zstd-compressed (level 1: cheap, ~4x smaller).
    A list page waits for discovery unless ``discovered`` (its links are in the frontier
    already) or ``same_as_last`` (the body its last fetch had: nothing new to find). An
    item page waits for cleaning (``new``) unless it is ``same_as_last`` (``unchanged``:
    its records came from the same body already) or there is nothing to clean
    (``skipped``: a failure, a 304, an empty body, not an item page)."""
    clean_state = clean_state_of(success, kind, body, same_as_last)
    discovered_at = None if to_discover(success, kind, body, same_as_last) and not discovered \
        else fetched_at
    return (fetched_at, fetch_key, source_id, task_id, attempt, url, final_url, status,
            json.dumps(headers), content_type, _ZSTD.compress(body) if body else None, "zstd",
            len(body), elapsed_ms, trace_id, worker, kind, clean_state, discovered_at)


async def ensure_partitions(conn: AsyncConnection, days: set[str]) -> None:
    """The staging partitions of these days, in the caller's transaction (the landing's)."""
    for day in sorted(days):
        await conn.execute("SELECT sc_ensure_day_partition('staging', %s::date)", (day,))


# What one flush lands besides the pages, one row per fetch: the staging row's key (NULL
# where the fetch has no response to stage), its ledger outcome (``o_*``) and its URL state.
LANDING_COLUMNS = ("fetched_at", "fetch_key", "o_task", "o_state", "o_status", "o_error",
                   "o_due", "o_recrawl", "o_changed", "o_attempt", "url_hash", "succeeded", "l_at",
                   "l_status", "l_length", "etag", "last_modified", "content_hash",
                   "canonical_url")
LANDING_TYPES = ("timestamptz", "text", "int8", "text", "int4", "text", "timestamptz",
                 "float4", "bool", "int4", "uuid", "bool", "timestamptz", "int4", "int4", "text",
                 "text", "uuid", "text")


def _temp_table(name: str, columns: Sequence[str], types: Sequence[str]) -> str:
    return (f"CREATE TEMP TABLE IF NOT EXISTS {name} ("
            + ", ".join(f"{c} {t}" for c, t in zip(columns, types, strict=True))
            + ") ON COMMIT DELETE ROWS")


_LANDING_DDL = _temp_table("landing", LANDING_COLUMNS, LANDING_TYPES)
_REPLAYED_DDL = _temp_table("replayed", COLUMNS, TYPES)
_COLS = ", ".join(COLUMNS)
# One statement applies a flush's outcomes to the tasks ``owner`` still holds (``held``)
# and updates only their URL state, queued for warm in the outbox (one entry per source,
# ``owner`` its writer: the URL-rule miner of that process skips its own entries;
# a page declaring itself canonical stores '' there, not its URL again;
# no index covers the URL-state columns written here, so the update is HOT: migration
# 0013). It returns the pages staged, and the staging keys of the pages whose task
# ``owner`` no longer holds (the caller deletes those rows again). Rows are joined in key
# order, the one lock order of every writer.
_LAND = (
    f"WITH held AS (UPDATE tasks t SET {OUTCOME_ASSIGNMENTS} FROM (SELECT o_task AS id, "
    "o_state AS state, o_status AS status, o_error AS error, o_due AS due_at, "
    "o_recrawl AS recrawl_s, o_changed AS changed, o_attempt AS attempt FROM landing "
    f"ORDER BY o_task) o WHERE t.id = o.id AND {HELD_BY} "
    "AND (o.attempt IS NULL OR t.attempts = o.attempt) RETURNING t.id), "
    "kept AS (SELECT l.* FROM landing l JOIN held h ON h.id = l.o_task), "
    "{staged}"
    "fetched AS (UPDATE url_state u SET last_crawled = v.l_at, http_status = v.l_status, "
    "etag = COALESCE(v.etag, u.etag), last_modified = COALESCE(v.last_modified, "
    "u.last_modified), content_hash = COALESCE(v.content_hash, u.content_hash), "
    "retry_count = 0, content_length = COALESCE(v.l_length, u.content_length), "
    "canonical_url = CASE WHEN v.content_hash IS NULL THEN u.canonical_url "
    "WHEN v.canonical_url = u.url THEN '' ELSE v.canonical_url END "
    "FROM (SELECT * FROM kept WHERE succeeded ORDER BY url_hash) v "
    "WHERE u.url_hash = v.url_hash RETURNING u.url_hash, u.source_id), "
    "queued AS (INSERT INTO warm_outbox (source_id, url_hashes, writer) SELECT source_id, "
    "array_agg(url_hash), %s FROM fetched GROUP BY source_id), "
    "lost AS (SELECT fetch_key, fetched_at FROM landing l WHERE fetch_key IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM held h WHERE h.id = l.o_task)) "
    "SELECT {count}, ARRAY(SELECT url_hash FROM kept WHERE NOT succeeded ORDER BY url_hash), "
    "ARRAY(SELECT fetch_key FROM lost), ARRAY(SELECT fetched_at FROM lost)")
# The pages went straight into staging by COPY (a bulk insert: a flush's ~1,000 pages in a
# few dozen heap writes, not one insert a row through a second table) ...
_LAND_COPIED = _LAND.format(staged="", count="(SELECT count(*) FROM landing "
                            "WHERE fetch_key IS NOT NULL)")
# ... or, replaying (spool, unknown commit outcome), through ``replayed``: only the held
# tasks' pages, each once.
_LAND_REPLAYED = _LAND.format(
    staged=f"staged AS (INSERT INTO staging ({_COLS}) SELECT {', '.join(f'r.{c}' for c in COLUMNS)} "
    "FROM replayed r JOIN kept k ON k.fetch_key = r.fetch_key AND k.fetched_at = r.fetched_at "
    "ON CONFLICT (fetch_key, fetched_at) DO NOTHING RETURNING 1), ",
    count="(SELECT count(*) FROM staged)")


def _landing_row(i: StagedFetch) -> tuple[Any, ...]:
    task_id, state, status, error, due_at, recrawl_s, changed = (*i.outcome, None, None)[:7]
    at, key = (i.row[0], i.row[1]) if i.row is not None else (None, None)
    return (at, key, task_id, str(_STATES[state]), status, error, due_at, recrawl_s, changed,
            i.attempt, i.url_hash, i.succeeded, i.fetched_at, i.status, i.body_bytes or None, i.etag,
            i.last_modified, i.content_hash, i.canonical_url)


async def _copy(cur: AsyncCursor[Any], table: str, columns: Sequence[str],
                types: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
    async with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN "
                        "(FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            await copy.write_row(row)


class _StepClock:
    """Seconds since the last lap, added to ``steps[name]`` (nothing if no ``steps``)."""

    def __init__(self, steps: dict[str, float] | None) -> None:
        self.steps = steps
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        if self.steps is not None:
            now = time.perf_counter()
            self.steps[name] = self.steps.get(name, 0.0) + now - self.t
            self.t = now


async def land(conn: AsyncConnection, owner: str, items: Sequence[StagedFetch],
               *, idempotent: bool, steps: dict[str, float] | None = None) -> int:
    """Apply the outcomes, land the rows and update URL state (queued for warm), in the
    caller's transaction; returns the rows staged.

    Only fetches whose task ``owner`` still holds, under the claim they were made in, land:
    a fetch whose lease was reclaimed — its worker stalled for a whole lease time, and the
    task is queued or leased again, perhaps by this same run (the claim's attempt number
    tells the two leases apart) — is dropped, so staging never holds a task's page twice.
    The pages are copied into staging first and the dropped ones deleted again (rare: it
    takes a stall of a whole lease time). ``idempotent`` (spool replays, unknown commit
    outcomes): the pages go through a session-local table instead, with ``ON CONFLICT
    (fetch_key, fetched_at) DO NOTHING``, and only the held tasks' pages are inserted (a
    row of the same key may be the one an earlier, committed attempt landed).

    Everything goes to the server as binary COPYs and one statement: sending the outcomes
    and URL state as arrays cost the client ~3x as much (psycopg dumps list parameters
    element by element in Python). ``steps``, if given, adds each step's seconds under
    ``pages`` (the COPY of the pages), ``landing`` (the COPY of the outcomes and URL
    facts) and ``outcomes`` (the statement applying them): what a benchmark reports.
    """
    if not items:
        return 0
    rows = [i.row for i in items if i.row is not None]
    await conn.execute(_LANDING_DDL)
    if idempotent:
        await conn.execute(_REPLAYED_DDL)
    clock = _StepClock(steps)
    async with conn.cursor() as cur:
        copy_encoded_json(cur)
        if rows:
            await _copy(cur, "replayed" if idempotent else "staging", COLUMNS, TYPES, rows)
        clock.lap("pages")
        await _copy(cur, "landing", LANDING_COLUMNS, LANDING_TYPES,
                    [_landing_row(i) for i in items])
        clock.lap("landing")
        await cur.execute(_LAND_REPLAYED if idempotent else _LAND_COPIED, (owner, owner))
        row = await cur.fetchone()
        clock.lap("outcomes")
    inserted, failed, keys, ats = (int(row[0]), list(row[1]), list(row[2]), list(row[3])) \
        if row else (0, [], [], [])
    if keys and not idempotent:
        cur = await conn.execute(
            "DELETE FROM staging WHERE (fetch_key, fetched_at) IN "
            "(SELECT unnest(%b::text[]), unnest(%b::timestamptz[]))", (keys, ats))
        inserted -= cur.rowcount
    if failed:
        await conn.execute("UPDATE url_state SET retry_count = retry_count + 1 "
                           "WHERE url_hash = ANY(%b::uuid[])", (failed,))
    return inserted


# -- discovery: the staged seed, list and sitemap pages whose links wait for the frontier ---
UndiscoveredRow = tuple[datetime, int, str, str, str | None, str | None, bytes | None, int, str]


async def claim_undiscovered(conn: AsyncConnection, limit: int) -> list[UndiscoveredRow]:
    """(fetched_at, id, source, URL, final URL, content type, stored body, task id, body
    encoding) of staged list pages not yet discovered, oldest first, locked for this
    transaction (SKIP LOCKED: other discoverers take the next ones)."""
    cur = await conn.execute(
        "SELECT fetched_at, id, source_id, url, final_url, content_type, body, task_id, "
        f"body_encoding FROM staging WHERE discovered_at IS NULL AND kind IN ({LISTS_SQL}) "
        "ORDER BY fetched_at LIMIT %s FOR UPDATE SKIP LOCKED", (limit,))
    return list(await cur.fetchall())


async def mark_discovered(conn: AsyncConnection, rows: Sequence[UndiscoveredRow]) -> None:
    """These claimed pages are discovered, in the transaction that claimed them."""
    if rows:
        await conn.execute(
            "UPDATE staging SET discovered_at = now() WHERE (fetched_at, id) IN "
            "(SELECT unnest(%b::timestamptz[]), unnest(%b::bigint[]))",
            ([r[0] for r in rows], [r[1] for r in rows]))


async def has_undiscovered(db: Db, source_ids: Sequence[str]) -> bool:
    """Whether staged seed/list/sitemap pages of these sources still wait for discovery."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM staging WHERE discovered_at IS NULL AND body IS NOT NULL "
            f"AND kind IN ({LISTS_SQL}) AND source_id = ANY(%b))",
            (list(source_ids),))
        row = await cur.fetchone()
        return bool(row and row[0])


# -- cleaning: staged item pages waiting to become records ---------------------------------
async def claim_for_cleaning(conn: AsyncConnection, source_ids: Sequence[str],
                             limit: int) -> list[tuple[Any, ...]]:
    """(fetched_at, id, source, task id, URL, final URL, content type, stored body, trace
    id, cleaned before, body encoding) of item pages to clean, oldest first, locked for
    this transaction."""
    cur = await conn.execute(
        "SELECT fetched_at, id, source_id, task_id, url, final_url, content_type, body, "
        "trace_id, cleaned_at IS NOT NULL, body_encoding FROM staging "
        "WHERE clean_state = 'new' AND source_id = ANY(%b) "
        "ORDER BY fetched_at LIMIT %s FOR UPDATE SKIP LOCKED", (list(source_ids), limit))
    return list(await cur.fetchall())


class CleanOutcome(NamedTuple):
    """What cleaning a staged page came to."""
    state: str                              # cleaned, format_error
    error: str | None = None
    encoding: str | None = None             # what its text was read in (None: not known)
    fields: dict[str, Any] | None = None    # a format error's fields the rules did find


async def mark_cleaned(conn: AsyncConnection, keys: Sequence[tuple[datetime, int]],
                       outcomes: Sequence[CleanOutcome]) -> None:
    """Each page's clean state, error, the encoding its text was read in (None: not known,
    e.g. a page cleaned from the parse cache by an older version; the one stored stays)
    and a format error's partial fields (``clean_fields``), in the transaction that
    claimed the pages."""
    await conn.execute(
        "UPDATE staging s SET clean_state = u.state, clean_error = u.err, cleaned_at = now(), "
        "encoding = COALESCE(u.enc, s.encoding), clean_fields = u.fields::jsonb "
        "FROM (SELECT unnest(%b::timestamptz[]) AS fa, unnest(%b::bigint[]) AS id, "
        "unnest(%b::text[]) AS state, unnest(%b::text[]) AS err, unnest(%b::text[]) AS enc, "
        "unnest(%b::text[]) AS fields) u "
        "WHERE s.fetched_at = u.fa AND s.id = u.id",
        ([k[0] for k in keys], [k[1] for k in keys], [o.state for o in outcomes],
         [o.error for o in outcomes], [o.encoding for o in outcomes],
         [None if o.fields is None else json.dumps(o.fields, ensure_ascii=False, default=str)
          for o in outcomes]))


async def requeue_for_cleaning(db: Db, source_id: str, day: date, *,
                               failed_only: bool = False) -> int:
    """A source-day's cleaned, failed and unchanged item pages back in the cleaning queue
    (after a rule fix an unchanged page may yield what its earlier fetch did not); with
    ``failed_only``, its format errors alone (the pages of a new layout, after rules for
    it: the pages of the old one keep their records)."""
    states = ["format_error"] if failed_only else ["cleaned", "format_error", "unchanged"]
    async with connection(db) as conn:
        cur = await conn.execute(
            "UPDATE staging SET clean_state = 'new', clean_error = NULL, clean_fields = NULL "
            "WHERE source_id = %s AND fetched_at >= %s::date AND fetched_at < %s::date + 1 "
            "AND kind = 'item' AND clean_state = ANY(%s)", (source_id, day, day, states))
        return cur.rowcount


async def clean_states(db: Db, source_ids: Sequence[str]
                       ) -> dict[str, dict[str, int]]:
    """Item pages fetched in the last 24 hours per source and clean state."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, clean_state, count(*) FROM staging WHERE kind = 'item' "
            "AND source_id = ANY(%b) AND fetched_at >= now() - interval '24 hours' "
            "GROUP BY 1, 2 ORDER BY 1, 2", (list(source_ids),))
        out: dict[str, dict[str, int]] = {}
        for sid, state, n in await cur.fetchall():
            out.setdefault(sid, {})[state] = n
        return out


async def staged_counts(db: Db) -> dict[str, tuple[int, int]]:
    """Per source: (item pages waiting to be cleaned, pages staged)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, count(*) FILTER (WHERE clean_state = 'new'), count(*) "
            "FROM staging GROUP BY 1 ORDER BY 1")
        return {str(s): (int(items), int(total)) for s, items, total in await cur.fetchall()}

async def format_error_counts(db: Db, source_ids: Sequence[str],
                              window: timedelta) -> list[tuple[str, int, int, int, int]]:
    """Per source: cleaned item pages and format errors within ``window``, and the same in
    the 24 hours before it."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, "
            "  count(*) FILTER (WHERE fetched_at >= now() - %(w)s), "
            "  count(*) FILTER (WHERE fetched_at >= now() - %(w)s AND clean_state = 'format_error'), "
            "  count(*) FILTER (WHERE fetched_at < now() - %(w)s), "
            "  count(*) FILTER (WHERE fetched_at < now() - %(w)s AND clean_state = 'format_error') "
            "FROM staging WHERE source_id = ANY(%(ids)s) AND kind = 'item' "
            "AND clean_state IN ('cleaned', 'format_error') "
            "AND fetched_at >= now() - %(w)s - interval '24 hours' GROUP BY source_id",
            {"w": window, "ids": list(source_ids)})
        return [tuple(row) for row in await cur.fetchall()]


# -- retention ------------------------------------------------------------------------------
async def staging_partitions(db: Db) -> list[str]:
    """The names of staging's day partitions (``staging_YYYYMMDD``), oldest first."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'staging'::regclass ORDER BY 1")
        return [str(r[0]) for r in await cur.fetchall()]


async def drop_partition(db: Db, name: str,
                         snapshot_sources: Sequence[str]) -> int:
    """Drop one day partition, its pages of ``snapshot_sources`` copied to
    ``page_snapshots`` first (one transaction); returns the pages copied."""
    copied = 0
    async with connection(db) as conn, conn.transaction():
        if snapshot_sources:
            cur = await conn.execute(
                f'INSERT INTO page_snapshots SELECT * FROM "{name}" WHERE source_id = ANY(%b) '
                "ON CONFLICT DO NOTHING", (list(snapshot_sources),))
            copied = cur.rowcount
        await conn.execute(f'DROP TABLE "{name}"')
    return copied


async def fetched_since(db: Db, source_id: str, url_hashes: Sequence[str], since: datetime
                        ) -> set[str]:
    """Which of the URLs of ``url_hashes`` (item pages of the source, by the fingerprint of
    their canonical URL) were fetched at or after ``since``, with a page or a 304 (the page
    its last fetch had). By the task's fingerprint, not the URL text: a task's URL may be a
    form of the canonical one (a session id in the path, say)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT t.url_hash FROM staging s JOIN tasks t ON t.id = s.task_id "
            "WHERE s.fetched_at >= %s AND s.source_id = %s AND t.url_hash = ANY(%b::uuid[]) "
            "AND s.kind = 'item' AND s.status IN (200, 304)",
            (since, source_id, list(url_hashes)))
        return {str(h) for (h,) in await cur.fetchall()}


async def newest_pages(db: Db, source_id: str, url_hashes: Sequence[str]
                       ) -> dict[str, tuple[str, str | None, bytes]]:
    """The newest page staged for each URL of ``url_hashes`` (item pages of the source that
    answered with a body; by the fingerprint of the canonical URL, as
    :func:`fetched_since`): fingerprint → (final URL, content type, body decoded from its
    stored encoding). Reads every staged page of the source (no index by URL): for a rare
    look, not a loop."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT ON (t.url_hash) t.url_hash, coalesce(s.final_url, s.url), "
            "s.content_type, s.body, s.body_encoding FROM staging s "
            "JOIN tasks t ON t.id = s.task_id WHERE s.source_id = %s "
            "AND t.url_hash = ANY(%b::uuid[]) AND s.kind = 'item' AND s.body IS NOT NULL "
            "AND s.status = 200 ORDER BY t.url_hash, s.fetched_at DESC",
            (source_id, list(url_hashes)))
        return {str(h): (str(f), t, decode_body(b, e))
                for h, f, t, b, e in await cur.fetchall()}


async def format_error_days(db: Db, source_id: str) -> list[date]:
    """The days (UTC) on which the source has item pages that are format errors."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT (fetched_at AT TIME ZONE 'UTC')::date FROM staging "
            "WHERE source_id = %s AND kind = 'item' AND clean_state = 'format_error' ORDER BY 1",
            (source_id,))
        return [d for (d,) in await cur.fetchall()]
