"""staging-load: drain the local spool into staging after a PostgreSQL outage (idempotent)."""

from __future__ import annotations

from prefect import flow

from flows.common import publish, runtime
from stratacrawl.crawl import drain_spool


@flow(name="staging-load", log_prints=True)
async def staging_load() -> dict[str, int]:
    async with runtime() as (_, comps):
        report = await drain_spool(comps)
    summary = {"files": report.files, "rows": report.rows, "inserted": report.inserted,
               "damaged": len(report.failed or [])}
    await publish("stratacrawl-staging-load", "Staging load",
                  [f"- {k}: {v}" for k, v in summary.items()] + [f"- damaged file: {f}" for f in
                                                                 report.failed or []])
    return summary
