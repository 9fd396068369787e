"""What a suite validates, and the values it is validated against.

Each source has one Great Expectations query asset (``cold/records.py asset_query``): its
records as typed columns, one row per record, a ``day`` column to partition on, and one
row of NULLs for a day without records (so an empty day fails completeness and freshness,
and counts 0 records). ``record_url`` is the canonical URL: one record per canonical URL
per day is the uniqueness rule, and its distinct count is the day's record count.

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

COUNT_TOLERANCE = 0.05
HISTORY_DAYS = 7
LEARNING_DAYS = 3
FUTURE_SKEW_S = 300.0
URL_RE = r"^https?://[^/?#\s]+"


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
