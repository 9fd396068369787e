"""Format anomalies: a sudden rise in a source's format errors (the site
redesign that still answers 200 and silently yields empty fields).

The rate of the last hour is compared with the rate of the 24 hours before it: an
anomaly needs enough pages to mean something, a high rate, and a jump over the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.alerts import raise_alert
from stratacrawl.cold.staging import format_error_counts

FORMAT_ANOMALY = "format_anomaly"


@dataclass(frozen=True)
class FormatRates:
    source_id: str
    recent_pages: int
    recent_errors: int
    baseline_pages: int
    baseline_errors: int

    @property
    def recent_rate(self) -> float:
        return self.recent_errors / self.recent_pages if self.recent_pages else 0.0

    @property
    def baseline_rate(self) -> float:
        return self.baseline_errors / self.baseline_pages if self.baseline_pages else 0.0

    def is_anomaly(self, *, min_pages: int = 20, min_rate: float = 0.2, jump: float = 3.0) -> bool:
        return (self.recent_pages >= min_pages and self.recent_rate >= min_rate
                and self.recent_rate >= jump * self.baseline_rate)


async def format_rates(pool: AsyncConnectionPool, source_ids: list[str],
                       window: timedelta = timedelta(hours=1)) -> list[FormatRates]:
    """Cleaned item pages and format errors per source, recent window vs the day before."""
    return [FormatRates(*row) for row in await format_error_counts(pool, source_ids, window)]


async def check_format_anomalies(pool: AsyncConnectionPool, source_ids: list[str]) -> list[str]:
    """Raise an alert for each source whose format errors jumped; returns their ids."""
    flagged = []
    for r in await format_rates(pool, source_ids):
        if not r.is_anomaly():
            continue
        flagged.append(r.source_id)
        await raise_alert(
            pool, kind=FORMAT_ANOMALY, source_id=r.source_id, severity="critical",
            message=(f"{r.source_id}: {r.recent_rate:.0%} of pages in the last hour do not fit "
                     f"the extraction rules (baseline {r.baseline_rate:.0%}): the site may have "
                     "changed its layout"),
            details={"recent_pages": r.recent_pages, "recent_errors": r.recent_errors,
                     "baseline_pages": r.baseline_pages, "baseline_errors": r.baseline_errors})
    return flagged
