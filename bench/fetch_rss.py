"""fetch_rss: ``fetch_worker_rss_mb`` as the target states it — the peak RSS of one
``stratacrawl crawl`` process over 1,000,000 pages staged, 1 % of item pages 1-5 MB
(40 simulated sources of 25,000 items — each sitemap stays under the 5 MB page cap —
stopped once 1,000,000 pages are staged: the sites keep publishing; ~20 minutes here).
``--quick``: 50,000 pages. ``bench fetch`` measures the same over a 5-minute crawl."""

from __future__ import annotations

from collections.abc import Iterator

from bench.fetch import OVERSIZED_RATE, _worker_rss
from bench.figure import Figure, Size, sized

FIGURES = ("fetch_worker_rss_mb",)

PAGES = 1_000_000
SOURCES = 40


def run(size: Size = "full") -> Iterator[Figure]:
    pages = sized(size, smoke=1_000, quick=50_000, full=PAGES)
    rss, landed, seconds, by_pages = _worker_rss(None, backlog=pages // SOURCES,
                                                 sources=SOURCES, pages=pages)
    yield Figure("fetch_rss", "fetch_worker_rss_mb", rss, "MB", None, None,
                 extra={"sources": SOURCES, "pages_staged": landed, "seconds": round(seconds, 1),
                        "oversized_rate": OVERSIZED_RATE, "process": "stratacrawl crawl",
                        "peak_mb_by_pages": {str(k): round(v, 1)
                                             for k, v in sorted(by_pages.items())}})
