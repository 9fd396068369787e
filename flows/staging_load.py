"""staging-load: drain the local spool into staging after a PostgreSQL outage (idempotent)."""

from __future__ import annotations

from prefect import flow

from flows.common import load_settings, publish, step
from stratacrawl.staging.loader import drain
from stratacrawl.wiring import open_app


@flow(name="staging-load", log_prints=True)
async def staging_load() -> dict[str, int]:
    async with open_app(await load_settings()) as comps:
        report = await step("drain the spool", lambda: drain(comps.spool, comps.pool))
    summary = {"files": report.files, "rows": report.rows, "inserted": report.inserted,
               "damaged": len(report.damaged)}
    await publish("stratacrawl-staging-load", "Staging load",
                  [f"- {k}: {v}" for k, v in summary.items()]
                  + [f"- damaged file {d.file}, set aside in {d.moved_to}: {d.reason}"
                     for d in report.damaged])
    return summary
