"""What a suite validates, and the values it is validated against.

Each source has one Great Expectations query asset: its records as typed columns, one row
per record, with a ``day`` column the asset's batch definition partitions on (GX adds
``WHERE day = '<day>'``, which PostgreSQL pushes into the query, so one source-day is read
through the records' primary key and nothing is loaded into pandas). A day with no records
still has a batch: one row of NULLs, so an empty day *fails* completeness and freshness
instead of passing them vacuously, and counts 0 records.

Columns: ``day``; ``record_url`` (the canonical URL: one record per canonical URL per day
is the uniqueness rule, and its distinct count is the day's record count);
``record_first_seen`` (when the record was first committed, i.e. new content: freshness);
per field its value as text (NULL when missing or empty: completeness and pattern
validity), and for numbers and dates a typed twin, ``<field>__number`` / ``<field>__time``
(NULL when missing or malformed: range validity).

The committed suites refer to per-run values as ``{"$PARAMETER": name}`` (``parameters``):
the expected count (the source's ``expected_daily``, else the median of its last
``HISTORY_DAYS`` validated days; with fewer than ``LEARNING_DAYS`` of history the count
is *learning*: reported, never failed; a day still in progress must have reached its
elapsed share), the freshness threshold and "not in the future".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.validation_results import count_history
from stratacrawl.sources import Source

URL = "record_url"
FIRST_SEEN = "record_first_seen"
COUNT_TOLERANCE = 0.05
HISTORY_DAYS = 7
LEARNING_DAYS = 3
FUTURE_SKEW_S = 300.0
CALENDAR_DAYS = 3660      # empty days have a batch up to ten years back
NUMERIC = {"int", "float", "price"}
TEMPORAL = {"date", "datetime"}
NUMBER_RE = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
# ISO 8601 dates as the cleaner writes them (a date, or a date-time with an offset or Z);
# the month and day ranges keep the typed cast from failing on a malformed value.
DATE_RE = (r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
           r"([T ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]+)?)?"
           r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?$")
URL_RE = r"^https?://[^/?#\s]+"


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


def asset_query(source: Source) -> str:
    """The query asset of ``source`` (see the module docstring). Literal SQL: a GX query
    asset takes no bind parameters; a source id is ``[a-z0-9_-]``, so quoting is safe."""
    sid = _literal(source.id)
    today = "(now() AT TIME ZONE 'UTC')::date"
    columns = ["day", URL, FIRST_SEEN]
    for name, kind in source.field_types.items():
        columns += field_columns(name, kind)
    return (f"SELECT {', '.join(columns)} FROM ("
            f"SELECT day, canonical_url AS {URL}, created_at AS {FIRST_SEEN}, fields "
            f"FROM records WHERE source_id = {sid} "
            f"UNION ALL SELECT d::date, NULL, NULL, NULL "
            f"FROM generate_series({today} - {CALENDAR_DAYS}, {today} + 1, interval '1 day') d "
            f"WHERE NOT EXISTS (SELECT 1 FROM records r WHERE r.source_id = {sid} "
            f"AND r.day = d::date)) AS source_days")


def day_end(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)


@dataclass(frozen=True)
class ExpectedCount:
    value: float | None     # None while learning
    basis: str              # "expected_daily", "median of N days", "learning (N of M days)"

    @property
    def learning(self) -> bool:
        return self.value is None


async def expected_count(pool: AsyncConnectionPool, source: Source, day: date) -> ExpectedCount:
    """``expected_daily`` when the source sets it; else the median record count of the
    source's last ``HISTORY_DAYS`` validated days before ``day`` — never what the crawler
    itself queued (a crawl that stopped early would then agree with itself)."""
    if source.expected_daily is not None:
        return ExpectedCount(float(source.expected_daily), "expected_daily")
    history = await count_history(pool, source.id, day, HISTORY_DAYS)
    if len(history) < LEARNING_DAYS:
        return ExpectedCount(None, f"learning ({len(history)} of {LEARNING_DAYS} days)")
    return ExpectedCount(float(statistics.median(history)), f"median of {len(history)} days")


def count_bounds(expected: ExpectedCount, share: float = 1.0) -> tuple[int, int | None]:
    """±5 % of the expected count; a day still in progress (``share`` of it elapsed) is
    held to its share so far below, and to the whole day above."""
    if expected.value is None:
        return 0, None
    return (math.ceil(expected.value * share * (1 - COUNT_TOLERANCE)),
            math.floor(expected.value * (1 + COUNT_TOLERANCE)))


async def parameters(pool: AsyncConnectionPool, source: Source, day: date,
                     now: datetime | None = None) -> tuple[dict[str, Any], ExpectedCount]:
    """Values for the suite's parameters, for this source-day checked at ``now`` (times as
    ISO 8601 strings: that is how they show in Data Docs)."""
    now = now or datetime.now(UTC)
    expected = await expected_count(pool, source, day)
    as_of = min(now, day_end(day))  # a past day is judged at its end
    share = min(1.0, max(0.0, 1 - (day_end(day) - as_of) / timedelta(days=1)))
    if share < 1 and not expected.learning:
        expected = ExpectedCount(expected.value, f"{expected.basis}, {share:.0%} of the day")
    low, high = count_bounds(expected, share)
    return {
        "min_count": low, "max_count": high,
        "fresh_after": (as_of - source.freshness_td).isoformat(),
        "not_after": (now + timedelta(seconds=FUTURE_SKEW_S)).isoformat(),
    }, expected
