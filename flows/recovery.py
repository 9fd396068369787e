"""recovery: rebuild hot (and warm where it is short) from cold; idempotent, safe at any time;
each step a task run of its own.
Runs when the local stack starts a worker (``stratacrawl up``) and as a deployment."""

from __future__ import annotations

from prefect import flow

from flows.common import publish, runtime, step
from stratacrawl.tiers.recovery import recover


@flow(name="recovery", log_prints=True)
async def recovery() -> dict[str, float]:
    async with runtime() as (_, comps):
        report = await recover(comps, run=step)  # a task run per step
    await publish("stratacrawl-recovery", f"Recovery in {report.seconds:.2f} s",
                  ["| step | result | seconds |", "| --- | --- | --- |",
                   *(f"| {s.name} | {s.result} | {s.seconds:.2f} |" for s in report.steps),
                   "", f"Fetching could resume after {report.resumed_after_s:.2f} s."])
    return {s.name: round(s.seconds, 3) for s in report.steps}
