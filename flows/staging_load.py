"""staging-load: drain the local spool into staging after a PostgreSQL outage (idempotent)."""

from __future__ import annotations

from prefect import flow

from flows.common import publish, runtime, step
from stratacrawl.staging.loader import drain
from stratacrawl.staging.spool import Spool


@flow(name="staging-load", log_prints=True)
async def staging_load() -> dict[str, int]:
    async with runtime() as (rt, comps):
        spool = Spool.of_state(rt.settings.state_path)
        report = await step("drain the spool", lambda: drain(spool, comps.pool, comps.ledger))
    summary = {"files": report.files, "rows": report.rows, "inserted": report.inserted,
               "damaged": len(report.failed or [])}
    await publish("stratacrawl-staging-load", "Staging load",
                  [f"- {k}: {v}" for k, v in summary.items()] + [f"- damaged file: {f}" for f in
                                                                 report.failed or []])
    return summary
