"""Crawling: one run of seed, fetch, stage and discover (:mod:`.run`), the steps the
Prefect flows also run on their own (:mod:`.steps`), and what a run reports
(:mod:`.report`). The same code serves ``stratacrawl crawl``, the demo and the flows."""

from stratacrawl.crawl.report import CrawlReport
from stratacrawl.crawl.run import CrawlRun, crawl
from stratacrawl.crawl.steps import demote_at_end, discover_staged, seed

__all__ = ["CrawlReport", "CrawlRun", "crawl", "demote_at_end", "discover_staged", "seed"]
