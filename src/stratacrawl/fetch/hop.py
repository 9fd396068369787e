"""The list hop: a fetched seed, list or sitemap page's links go into the frontier right
after the fetch, in the batch that fetched it — not after its staging row lands and a
discovery pass reads it back (a 75-page list chain took minutes that way).

Durable without waiting for staging: the links are ledger rows (committed) before the
page's own staging row and outcome commit; a crash in between leaves the page's lease
unacknowledged, so the page is fetched again and its links found again (dedup makes that
harmless). When the hop fails (PostgreSQL or Redis away), the page is staged undiscovered
and the discovery loop reads its links from staging instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from stratacrawl.cold.tasks import ClaimedTask
from stratacrawl.fetch.result import FetchResult
from stratacrawl.frontier.discovery import Discovery, DiscoveryStats
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.sources import Source

log = logging.getLogger(__name__)


class ListHop:
    """Discovers fetched pages' links through ``discovery``; each page's figures go to
    ``on_discovered`` (the crawl report), the time from the end of its fetch to its
    links in the frontier to ``hops``."""

    def __init__(self, discovery: Discovery,
                 on_discovered: Callable[[DiscoveryStats], None] | None = None) -> None:
        self.discovery = discovery
        self.on_discovered = on_discovered
        self.hops = LatencyHistogram()

    async def __call__(self, source: Source, task: ClaimedTask, result: FetchResult,
                       fetched: float) -> DiscoveryStats | None:
        """The page's discovery figures, or None when it failed (the page then waits
        in staging for the discovery loop); ``fetched``: ``time.monotonic()`` when its
        fetch ended."""
        try:
            page = await self.discovery.discover_page(
                source, result.final_url or task.url, result.body, result.content_type)
        except Exception as e:  # a tier away: staging keeps the page for the loop
            log.warning("fetch: links of %s left to the discovery loop (%r)", task.url, e)
            return None
        self.hops.add((time.monotonic() - fetched) * 1000)
        if self.on_discovered is not None:
            self.on_discovered(page)
        return page

    async def offer(self, source: Source, url: str) -> None:
        """A redirect target the fetch did not follow (out of the source's scope), offered
        to discovery like a link on a page: queued if the source's rules take it, else
        counted where discovery counts what it drops."""
        try:
            found = await self.discovery.discover(source, None, [url])
        except Exception as e:  # a tier away: a dropped offer loses nothing fetched
            log.warning("fetch: redirect target %s not offered to discovery (%r)", url, e)
            return
        if self.on_discovered is not None:
            self.on_discovered(found)
