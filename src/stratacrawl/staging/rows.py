"""A fetched page as a staging row, and the SQL that lands rows with their ledger updates.

All staging SQL lives here: the writer (normal path) and the spool loader (after an
outage) call the same ``land`` with ``idempotent`` set for replays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import zstandard
from psycopg import AsyncConnection

from stratacrawl.frontier.ledger import Ledger
from stratacrawl.frontier.tasks import LISTS, Outcome, TaskState

COLUMNS = ("fetched_at", "fetch_key", "source_id", "task_id", "attempt", "url", "final_url",
           "status", "headers", "content_type", "body", "body_encoding", "body_bytes",
           "elapsed_ms", "trace_id", "worker", "kind", "clean_state", "discovered_at")
TYPES = ("timestamptz", "text", "text", "int8", "int4", "text", "text", "int4", "jsonb", "text",
         "bytea", "text", "int4", "float4", "text", "text", "text", "text", "timestamptz")
_ZSTD = zstandard.ZstdCompressor(level=1)
_STATES = {s.value: s for s in TaskState}  # outcome states: members, or strings from the spool


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


def make_row(*, fetched_at: datetime, fetch_key: str, source_id: str, task_id: int,
             attempt: int, url: str, final_url: str | None, status: int | None,
             headers: dict[str, str], content_type: str | None, body: bytes,
             elapsed_ms: float, trace_id: str, worker: str, kind: str,
             success: bool, same_as_last: bool = False) -> tuple[Any, ...]:
    """A staging row; the body is stored zstd-compressed (level 1: cheap, ~4x smaller).
    A list page ``same_as_last`` (the body its last fetch had) is not discovered again."""
    clean_state = "new" if success and kind == "item" and body else "skipped"
    discover = success and kind in LISTS and body and not same_as_last
    discovered_at = None if discover else fetched_at
    return (fetched_at, fetch_key, source_id, task_id, attempt, url, final_url, status,
            json.dumps(headers), content_type, _ZSTD.compress(body) if body else None, "zstd",
            len(body), elapsed_ms, trace_id, worker, kind, clean_state, discovered_at)


async def ensure_partitions(conn: AsyncConnection, days: set[str]) -> None:
    for day in sorted(days):
        await conn.execute("SELECT sc_ensure_day_partition('staging', %s::date)", (day,))


async def land(conn: AsyncConnection, ledger: Ledger, owner: str, items: Sequence[StagedFetch],
               *, idempotent: bool) -> int:
    """Apply the outcomes, COPY the rows and update URL state, in the caller's transaction.

    Only fetches whose task ``owner`` still holds land: the outcomes go first (guarded by
    the lease) and a fetch whose lease was reclaimed — its worker stalled for a whole lease
    time, and the task is queued or leased again — is dropped, so staging never holds a
    task's page twice. ``idempotent`` (spool replays, unknown commit outcomes): rows go
    through a temporary table and ``ON CONFLICT (fetch_key, fetched_at) DO NOTHING``.
    Returns the rows inserted.
    """
    outcomes = [Outcome(o[0], _STATES[o[1]], o[2], o[3], o[4], *o[5:7]) for o in
                (i.outcome for i in items)]
    held = await ledger.finish_held(outcomes, owner, conn)
    items = [i for i in items if i.outcome[0] in held]
    cols = ", ".join(COLUMNS)
    async with conn.cursor() as cur:
        if idempotent:
            await cur.execute("CREATE TEMP TABLE IF NOT EXISTS staging_in (LIKE staging INCLUDING "
                              "DEFAULTS) "
                              "ON COMMIT DELETE ROWS")
            target = "staging_in"
        else:
            target = "staging"
        async with cur.copy(f"COPY {target} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(TYPES))
            staged = [i.row for i in items if i.row is not None]
            for row in staged:
                await copy.write_row(row)
        inserted = len(staged)
        if idempotent:
            await cur.execute(f"INSERT INTO staging ({cols}) SELECT {cols} FROM staging_in "
                              "ON CONFLICT (fetch_key, fetched_at) DO NOTHING")
            inserted = cur.rowcount
    # Rows are locked in URL-hash order so two flushes at once cannot deadlock each other.
    ok = sorted((i for i in items if i.succeeded), key=lambda i: i.url_hash)
    if ok:
        await conn.execute(
            "UPDATE url_state u SET last_crawled = v.at, http_status = v.status, "
            "etag = COALESCE(v.etag, u.etag), last_modified = COALESCE(v.lm, u.last_modified), "
            "content_hash = COALESCE(v.ch, u.content_hash), retry_count = 0, "
            "content_length = COALESCE(v.len, u.content_length), "
            "canonical_url = CASE WHEN v.ch IS NULL THEN u.canonical_url ELSE v.canon END "
            "FROM (SELECT unnest(%s::text[]) AS h, unnest(%s::timestamptz[]) AS at, "
            "unnest(%s::int[]) AS status, unnest(%s::text[]) AS etag, unnest(%s::text[]) AS lm, "
            "unnest(%s::text[]) AS ch, unnest(%s::int[]) AS len, unnest(%s::text[]) AS canon) v "
            "WHERE u.url_hash = v.h",
            ([i.url_hash for i in ok], [i.fetched_at for i in ok], [i.status for i in ok],
             [i.etag for i in ok], [i.last_modified for i in ok], [i.content_hash for i in ok],
             [i.body_bytes or None for i in ok], [i.canonical_url for i in ok]))
    failed = sorted(i.url_hash for i in items if not i.succeeded)
    if failed:
        await conn.execute("UPDATE url_state SET retry_count = retry_count + 1 "
                           "WHERE url_hash = ANY(%s)", (failed,))
    return inserted
