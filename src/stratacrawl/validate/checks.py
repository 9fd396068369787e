"""What a suite validates: one source-day of records as typed columns (a query PostgreSQL
runs itself — SQL pushdown, no table loaded into pandas), and the run-time parameters the
committed suites refer to (``{"$PARAMETER": ...}``): expected count, freshness threshold."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta

from psycopg_pool import AsyncConnectionPool

from stratacrawl.sources import Source

FINGERPRINT = "record_fingerprint"
NEWEST = "record_first_seen_epoch"  # when the record was first committed (new content)
LAST_FETCH = "source_last_fetch_epoch"
COUNT_TOLERANCE = 0.05
FUTURE_SKEW_S = 300.0
NUMERIC = {"int", "float", "price"}
TEMPORAL = {"date", "datetime"}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def field_column(name: str, kind: str) -> str:
    """The SQL of one record field as a typed column (malformed values read as NULL)."""
    ref, text = f"fields->{_literal(name)}", f"fields->>{_literal(name)}"
    if kind in NUMERIC:
        expr = f"CASE WHEN jsonb_typeof({ref}) = 'number' THEN ({text})::float8 END"
    elif kind in TEMPORAL:
        expr = (f"CASE WHEN {text} ~ '^\\d{{4}}-\\d{{2}}-\\d{{2}}' "
                f"THEN extract(epoch FROM ({text})::timestamptz)::float8 END")
    else:
        expr = f"NULLIF({text}, '')"
    return f"{expr} AS {_ident(name)}"


def day_end(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)


def check_query(source: Source, day: date) -> str:
    """The rows of one source-day. Literal SQL (a Great Expectations query asset takes no
    bind parameters); the source id is ``[a-z0-9_-]`` and the day a date, so quoting is safe."""
    sid, d = _literal(source.id), _literal(day.isoformat())
    columns = [f"fingerprint AS {FINGERPRINT}",
               f"extract(epoch FROM created_at)::float8 AS {NEWEST}",
               f"(SELECT extract(epoch FROM max(fetched_at))::float8 FROM staging "
               f"WHERE source_id = {sid} AND status BETWEEN 200 AND 399 "
               f"AND fetched_at < {d}::date + 1) AS {LAST_FETCH}"]
    columns += [field_column(name, kind) for name, kind in source.field_types.items()]
    return (f"SELECT {', '.join(columns)} FROM records "
            f"WHERE source_id = {sid} AND day = {d}::date")


async def expected_count(pool: AsyncConnectionPool, source: Source, day: date) -> int:
    """``expected_daily`` when the source sets it; else the detail pages discovered that day
    whose fetch succeeded, counted by content (each should have become a record; URLs that
    differ only by a parameter the site ignores serve the same page and count once)."""
    if source.expected_daily is not None:
        return source.expected_daily
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT count(DISTINCT coalesce(u.content_hash, t.url_hash)) FROM tasks t "
            "LEFT JOIN url_state u ON u.url_hash = t.url_hash "
            "WHERE t.source_id = %s AND t.kind = 'item' AND t.state = 'SUCCEEDED' "
            "AND t.created_at >= %s::date AND t.created_at < %s::date + 1",
            (source.id, day, day))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def parameters(pool: AsyncConnectionPool, source: Source, day: date,
                     now: datetime | None = None) -> dict[str, float]:
    """Values for the suite's parameters, for this source-day checked at ``now``."""
    now = now or datetime.now(UTC)
    expected = await expected_count(pool, source, day)
    as_of = min(now, day_end(day))  # a past day is judged at its end
    return {
        "expected_count": expected,
        "min_count": math.ceil(expected * (1 - COUNT_TOLERANCE)),
        "max_count": math.floor(expected * (1 + COUNT_TOLERANCE)),
        "fresh_after": (as_of - source.freshness_td).timestamp(),
        "not_after": now.timestamp() + FUTURE_SKEW_S,
    }
