"""compensation (nightly, level-3 retries): overdue tasks re-scheduled, parked
batches released, expired leases reclaimed; a report per source."""

from __future__ import annotations

from datetime import timedelta

from prefect import flow

from flows.common import load_settings, publish_table, step
from stratacrawl.tiers.compensation import compensate
from stratacrawl.wiring import open_app


@flow(name="compensation", log_prints=True)
async def compensation(overdue_after_hours: float | None = None) -> dict[str, dict[str, int]]:
    async with open_app(await load_settings()) as comps:
        hours = overdue_after_hours or comps.settings.compensate_after_h
        report = await compensate(comps.frontier, overdue_after=timedelta(hours=hours),
                                  run=step)  # a task run per step
    out = {sid: {"reclaimed": r.reclaimed, "rescheduled": r.rescheduled, "released": r.released,
                 "unfinished": sum(r.unfinished.values()), "failed_24h": r.failed_24h}
           for sid, r in sorted(report.items())}
    await publish_table("stratacrawl-compensation", "Compensation per source",
                        [{"source": sid, **v} for sid, v in out.items()])
    return out
