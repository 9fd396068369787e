"""Validation results in the cold tier: one row per validated source-day and run, with
each check's outcome (``results``: a list of ``{check, column, success, observed, ...}``).
The newest row of a source-day is that day's verdict: the quality gate of ``export`` and
the history the expected record count is learned from both read it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from stratacrawl.cold.pool import Db, connection

LOOKBACK_DAYS = 60   # how far back the count history looks for validated days


@dataclass(frozen=True)
class DayVerdict:
    day: date
    success: bool
    failed: list[str]          # "completeness title", "count", ...
    data_docs: str | None


async def store_results(db: Db, run_id: str,
                        rows: Iterable[Mapping[str, Any]]) -> None:
    """Insert one row per validated source-day (keys: source_id, day, suite, success,
    statistics, results, data_docs), in one transaction."""
    async with connection(db) as conn, conn.transaction():
        for r in rows:
            await conn.execute(
                "INSERT INTO validation_results (run_id, source_id, day, suite, success, "
                "statistics, results, data_docs) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (run_id, r["source_id"], r["day"], r["suite"], r["success"],
                 json.dumps(r["statistics"], default=str), json.dumps(r["results"], default=str),
                 r["data_docs"]))


async def count_history(db: Db, source_id: str, before: date,
                        days: int) -> list[float]:
    """The observed record counts of the source's last ``days`` validated days before
    ``before`` (the newest result of each day), newest first."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT (c->>'observed')::float8 FROM ("
            "  SELECT DISTINCT ON (day) day, results FROM validation_results"
            "  WHERE source_id = %s AND day < %s AND day >= %s"
            "  ORDER BY day DESC, run_at DESC) v, jsonb_array_elements(v.results) c "
            "WHERE c->>'check' = 'count' AND jsonb_typeof(c->'observed') = 'number' "
            "ORDER BY v.day DESC LIMIT %s",
            (source_id, before, before - timedelta(days=LOOKBACK_DAYS), days))
        return [float(v) for (v,) in await cur.fetchall()]


async def day_verdicts(db: Db, source_id: str, since: date,
                       until: date | None) -> dict[date, DayVerdict]:
    """The newest verdict of each validated day of the source in ``[since, until]``."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT ON (day) day, success, results, data_docs FROM validation_results "
            "WHERE source_id = %s AND day >= %s AND (%s::date IS NULL OR day <= %s) "
            "ORDER BY day, run_at DESC", (source_id, since, until, until))
        rows = await cur.fetchall()
    return {day: DayVerdict(day, success, [
        " ".join(p for p in (c.get("check"), c.get("column")) if p)
        for c in results or [] if not c.get("success") and c.get("status") != "learning"],
        docs) for day, success, results, docs in rows}


async def latest_per_source(db: Db) -> dict[str, tuple[bool, str, str | None]]:
    """Each source's newest validation: (passed, day, its Data Docs page)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT ON (source_id) source_id, success, day::text, data_docs "
            "FROM validation_results ORDER BY source_id, run_at DESC")
        return {sid: (ok, day, docs) for sid, ok, day, docs in await cur.fetchall()}
