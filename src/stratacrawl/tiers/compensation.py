"""Compensation (level-3 retries): the nightly sweep for work that slipped.

- expired leases go back to the queue (a worker died mid-batch);
- tasks overdue by more than the threshold are re-scheduled now, one priority up (their
  source starved, or the hot window lost them);
- batches parked in the delay queue beyond any legitimate delay are released;
- tasks that ended FAILED because one of our own tiers did not answer (never the page's
  fault; older versions spent attempts on it) are queued again;
- a report per source: what was done and what is still unfinished, by age.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from stratacrawl.cold.runs import DEAD_AFTER
from stratacrawl.frontier.frontier import LEVEL2_DELAY, Frontier
from stratacrawl.step_runner import StepRunner, run_directly


@dataclass
class SourceCompensation:
    reclaimed: int = 0
    rescheduled: int = 0
    released: int = 0
    requeued: int = 0     # FAILED for a tier that did not answer: queued again
    unfinished: dict[str, int] = field(default_factory=dict)   # age bucket → tasks
    failed_24h: int = 0


async def compensate(frontier: Frontier, *, overdue_after: timedelta,
                     run: StepRunner = run_directly) -> dict[str, SourceCompensation]:
    """Reclaim expired leases, re-schedule overdue tasks, release parked batches (in the
    frontier's ledger), refill the hot queues of the sources touched, then count what is
    unfinished and what failed; each step through ``run`` (a task run of its own in a
    flow)."""
    ledger = frontier.ledger
    report: dict[str, SourceCompensation] = {}

    def of(source_id: str) -> SourceCompensation:
        return report.setdefault(source_id, SourceCompensation())

    for source_id, _ in await run("reclaim expired leases",
                                  lambda: ledger.reclaim_expired(DEAD_AFTER)):
        of(source_id).reclaimed += 1
    for sid in await run("re-schedule overdue tasks",
                         lambda: ledger.reschedule_overdue(overdue_after)):
        of(sid).rescheduled += 1
    for sid in await run("release parked batches",
                         lambda: ledger.release_parked(LEVEL2_DELAY * 2)):
        of(sid).released += 1
    for sid in await run("re-queue tasks failed by a tier outage",
                         ledger.requeue_tier_failures):
        of(sid).requeued += 1
    for sid, bucket, n in await run("count unfinished work", ledger.unfinished_by_age):
        of(sid).unfinished[bucket] = n
    for sid, n in await run("count failures of the last day", ledger.failed_last_day):
        of(sid).failed_24h = n
    moved = [sid for sid, r in report.items() if r.reclaimed or r.rescheduled or r.released
             or r.requeued]

    async def refill() -> None:
        for sid in moved:
            await frontier.refill(sid, force=True)

    await run("refill hot queues", refill)
    return report
