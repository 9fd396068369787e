"""submit: urgent URLs for a source, from the Prefect UI (same as ``stratacrawl submit``)."""

from __future__ import annotations

from prefect import flow

from flows.common import flow_sources, load_settings, publish
from stratacrawl.errors import StratacrawlError
from stratacrawl.wiring import open_app


@flow(name="submit", log_prints=True)
async def submit(source: str, urls: list[str], sources_file: str | None = None) -> dict[str, int]:
    """Queue ``urls`` for ``source`` ahead of every scheduled task."""
    async with open_app(await load_settings(sources=sources_file)) as comps:
        stats = await comps.discovery.submit(flow_sources(comps.settings, source=source).get(source), urls)
    await publish("stratacrawl-submit", f"Urgent URLs for {source}",
                  [f"- queued: {stats.queued}", *(f"- dropped ({k}): {v}"
                                                  for k, v in stats.dropped.items())])
    if stats.dropped:  # a refused URL fails the run (red in the UI), after the artifact
        raise StratacrawlError(f"refused {sum(stats.dropped.values())} of {len(urls)} URL(s): "
                               + ", ".join(f"{k} {v}" for k, v in stats.dropped.items()))
    return {"queued": stats.queued, "dropped": 0}
