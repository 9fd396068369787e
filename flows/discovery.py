"""discovery: seeds and due list pages per cadence; links of fetched list pages → frontier."""

from __future__ import annotations

import functools

from prefect import flow

from flows.common import figures, flow_sources, load_settings, publish_table, step
from stratacrawl.crawl import discover_staged, seed
from stratacrawl.frontier.discovery import DiscoveryStats
from stratacrawl.sources import SourcesFile
from stratacrawl.wiring import open_app


@flow(name="discovery", log_prints=True)
async def discovery(sources_file: str | None = None, max_pages: int = 5000) -> dict[str, int]:
    """Enqueue due seeds and sitemaps, then expand up to ``max_pages`` staged list pages."""
    async with open_app(await load_settings(sources=sources_file)) as comps:
        sources = flow_sources(comps.settings)
        stats = DiscoveryStats()
        for source in sources.sources:  # a task run per source
            one = SourcesFile(path=sources.path, sources=[source])
            stats.merge(await step(f"seed {source.id}",
                                   functools.partial(seed, comps, one)))

        async def expand() -> DiscoveryStats:
            expanded = DiscoveryStats()
            while expanded.links < max_pages * 1000:
                found = await discover_staged(comps, sources)
                expanded.merge(found)
                if not found.links:
                    break
            return expanded

        stats.merge(await step("expand staged list pages", expand))
    summary = {"links": stats.links, "queued": stats.queued, "requeued": stats.requeued,
               "known": stats.known, **{f"dropped_{k}": v for k, v in stats.dropped.items()}}
    await publish_table("stratacrawl-discovery", "Discovery", figures(summary))
    return summary

