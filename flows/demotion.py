"""demotion (every few minutes): committed fetches' URL state and page metadata → warm.

Fetch workers only demote at the end of a run (``STRATACRAWL_DEMOTE_EVERY_S``), so this
keeps warm current while they crawl, in a process of its own. One demoter at a time
cluster-wide (an advisory lock): a run that finds another one busy leaves it the work."""

from __future__ import annotations

import time

from prefect import flow

from flows.common import figures, load_settings, publish_table, step
from stratacrawl.tiers.demotion import demote
from stratacrawl.wiring import open_app


@flow(name="demotion", log_prints=True)
async def demotion() -> dict[str, object]:
    t0 = time.monotonic()
    async with open_app(await load_settings()) as comps:
        stats = await step("demote to warm", lambda: demote(comps.pool, comps.warm))
    summary: dict[str, object] = {"rows": stats.rows, "docs": stats.docs, "busy": stats.busy,
                                  "error": stats.error,
                                  "seconds": round(time.monotonic() - t0, 1)}
    await publish_table("stratacrawl-demotion", f"Demotion: {stats.rows} URL states to warm",
                        figures(summary))
    if stats.error:
        raise RuntimeError(f"demotion stopped: {stats.error} (the watermark stays; "
                           "the next run goes on from it)")
    return summary
