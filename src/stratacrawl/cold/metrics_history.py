"""The ``metrics_minutes`` table: per source and minute, the live counters rolled up from
hot and the backlog and ingest measured at evaluation (``monitor/history.py`` writes it,
the ops page's charts read it)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from stratacrawl.cold.pool import Db, connection


@dataclass
class MinuteRow:
    source_id: str
    minute: datetime
    requests: int | None = None
    ok: int | None = None
    failed: int | None = None
    retries: int | None = None
    latency_ms_sum: float | None = None
    p99_ms: float | None = None
    hot_backlog: int | None = None
    ledger_backlog: int | None = None
    staged_per_min: float | None = None


COLUMNS = [f.name for f in fields(MinuteRow)]
_VALUES = COLUMNS[2:]
# Two writers fill different columns of the same minute: a NULL never overwrites a value.
_UPSERT = (f"INSERT INTO metrics_minutes ({', '.join(COLUMNS)}) VALUES "
           f"({', '.join(['%s'] * len(COLUMNS))}) ON CONFLICT (source_id, minute) DO UPDATE SET "
           + ", ".join(f"{c} = COALESCE(EXCLUDED.{c}, metrics_minutes.{c})" for c in _VALUES))


async def record_minutes(db: Db, rows: list[MinuteRow]) -> None:
    if not rows:
        return
    async with connection(db) as conn, conn.cursor() as cur:
        await cur.executemany(_UPSERT, [[getattr(r, c) for c in COLUMNS] for r in rows])


def _of_source(sql: str, params: list[object],
               source_id: str | None) -> tuple[str, list[object]]:
    """``sql``/``params`` narrowed to one source (``None``: every source)."""
    if source_id is None:
        return sql, params
    return sql + " AND source_id = %s", [*params, source_id]


async def read_minutes(db: Db, since: datetime,
                       source_id: str | None = None) -> list[MinuteRow]:
    """Rows since ``since``, by minute (one source, or every source)."""
    sql, params = _of_source(f"SELECT {', '.join(COLUMNS)} FROM metrics_minutes "
                             "WHERE minute >= %s", [since], source_id)
    async with connection(db) as conn:
        cur = await conn.execute(sql + " ORDER BY minute, source_id", params)
        return [MinuteRow(*row) for row in await cur.fetchall()]


async def prune_minutes(db: Db, before: datetime) -> int:
    async with connection(db) as conn:
        cur = await conn.execute("DELETE FROM metrics_minutes WHERE minute < %s", (before,))
        return cur.rowcount


async def alert_spans(db: Db, since: datetime,
                      source_id: str | None = None) -> list[tuple[datetime, datetime | None,
                                                                  str, str | None, str]]:
    """Alerts open at any time since ``since``: (raised, resolved or None, level or
    severity, source, kind) — the charts' alert timeline."""
    sql, params = _of_source("SELECT raised_at, resolved_at, coalesce(level, severity), "
                             "source_id, kind FROM alerts WHERE (resolved_at IS NULL OR "
                             "resolved_at >= %s)", [since], source_id)
    async with connection(db) as conn:
        cur = await conn.execute(sql + " ORDER BY raised_at", params)
        return list(await cur.fetchall())


async def validation_strip(db: Db, source_id: str,
                           days: int = 14) -> list[tuple[str, bool, str | None]]:
    """The newest result of each of the source's last ``days`` validated days:
    (day, success, Data Docs page)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT ON (day) day::text, success, data_docs FROM validation_results "
            "WHERE source_id = %s AND day > current_date - %s ORDER BY day, run_at DESC",
            (source_id, days))
        return list(await cur.fetchall())
