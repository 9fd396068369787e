"""A fetch run's verdict per source: what makes a run Failed instead of Completed."""

from __future__ import annotations

from collections import Counter

import pytest

from stratacrawl.crawl.report import CrawlReport
from stratacrawl.crawl.verdict import failing_sources
from stratacrawl.fetch.recording import SourceStats
from stratacrawl.sources import parse_sources

pytestmark = pytest.mark.unit

SOURCES = parse_sources({"sources": [
    {"id": s, "seeds": [f"http://{s}.example/"], "alerts": {"min_requests": 20}}
    for s in ("down", "flaky", "fine", "small", "idle", "held")]})


def stats(ok: int, failed: int, **reasons: int) -> SourceStats:
    return SourceStats(fetched=ok + failed, ok=ok, failed=failed,
                       reasons=Counter({"http-200": ok, **reasons}))


def test_failing_sources_name_each_reason() -> None:
    report = CrawlReport()
    report.sources = {"down": stats(0, 87, **{"connect-error": 87}),
                      "flaky": stats(80, 20, **{"http-503": 20}),   # 80 %: below 90 %
                      "fine": stats(95, 5, **{"http-404": 5}),      # 95 %: above
                      "small": stats(3, 2, timeout=2),               # too few to judge
                      "idle": SourceStats(), "held": SourceStats()}
    lines = failing_sources(report, SOURCES, still_due={"held"})
    assert lines == [
        "down: 0 of 87 pages ok (0%, alert below 90%): connect-error 87",
        "flaky: 80 of 100 pages ok (80%, alert below 90%): http-503 20",
        "held: nothing fetched though work was due",
    ]


def test_a_source_that_got_no_page_fails_however_few_it_tried() -> None:
    report = CrawlReport()
    report.sources = {"small": stats(0, 2, **{"robots-unavailable": 2})}
    assert failing_sources(report, SOURCES) == [
        "small: 0 of 2 pages ok (0%, alert below 90%): robots-unavailable 2"]
