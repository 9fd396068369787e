"""recovery: rebuild hot (and warm where it is short) from cold; idempotent, safe at any time;
each step a task run of its own.
Runs when the local stack starts a worker (``stratacrawl up``) and as a deployment."""

from __future__ import annotations

from prefect import flow

from flows.common import load_settings, publish_table, step
from stratacrawl.wiring import open_app


@flow(name="recovery", log_prints=True)
async def recovery() -> dict[str, float]:
    async with open_app(await load_settings()) as comps:
        report = await comps.recovery().run(step)  # a task run per step
    await publish_table("stratacrawl-recovery",
                        f"Recovery in {report.seconds:.2f} s; fetching could resume after "
                        f"{report.resumed_after_s:.2f} s",
                        [{"step": s.name, "result": s.result, "seconds": round(s.seconds, 3)}
                         for s in report.steps])
    return {s.name: round(s.seconds, 3) for s in report.steps}
