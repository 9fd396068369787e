"""Recovery: idempotent, safe at any time, each step timed.

Cold is the truth; hot and warm are rebuilt from it. Order matters for how fast work
resumes: leases and ready queues first (fetching resumes), then sessions and the spool,
then the Bloom filter (streamed from cold; dedup takes the exact path until it is marked
ready, so it is never wrong meanwhile), then warm wherever it holds less than cold expects.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from stratacrawl.cold.runs import DEAD_AFTER
from stratacrawl.cold.url_state import all_url_hashes, synced_per_week, unsync_weeks
from stratacrawl.components import Components
from stratacrawl.fetch.sessions import restore_sessions
from stratacrawl.staging.loader import drain
from stratacrawl.staging.spool import Spool
from stratacrawl.steps import StepRunner, run_directly
from stratacrawl.tiers.demotion import demote
from stratacrawl.warm.url_docs import docs_per_week

BLOOM_CHUNK = 100_000


@dataclass
class StepResult:
    name: str
    seconds: float
    result: str


@dataclass
class RecoveryReport:
    steps: list[StepResult] = field(default_factory=list)
    resumed_after_s: float = 0.0     # ready queues rebuilt: fetching can resume
    seconds: float = 0.0

    def lines(self) -> list[str]:
        return [f"{s.name}: {s.result} ({s.seconds:.2f} s)" for s in self.steps]


async def rebuild_queues(comps: Components) -> int:
    queued = 0
    for source_id in await comps.ledger.sources_with_ready_tasks():
        queued += await comps.frontier.refill(source_id, force=True)
    return queued


async def rebuild_bloom(comps: Components) -> int:
    """Every URL cold knows, streamed into the filter; then the filter is marked ready."""
    if await comps.bloom.is_ready():
        return 0
    added = 0
    async with all_url_hashes(comps.pool, BLOOM_CHUNK) as chunks:
        async for fps in chunks:
            await comps.bloom.check_and_add(fps)
            added += len(fps)
    await comps.bloom.mark_ready()
    return added


async def reindex_warm(comps: Components) -> str:
    """Warm is rebuilt from cold wherever it holds less than cold says it should: per
    weekly index, the documents warm counts against the rows cold marked synced for that
    week and still within the warm retention (older ones sank to cold on purpose). A week
    that came up short — an embedded API server restarted empty, an index lost or wiped
    while a crawl went on — is re-indexed from cold (by ``_id``: idempotent)."""
    layout = comps.runtime.layout
    retention = timedelta(days=comps.runtime.settings.warm_retention_days)
    try:
        in_warm = await docs_per_week(comps.es, layout)
    except Exception as e:
        return f"warm unavailable ({type(e).__name__}); backfill later"
    expected = await synced_per_week(comps.pool, retention)
    short = sorted(week for week, n in expected.items() if in_warm.get(week, 0) < n)
    if not short:
        return f"warm holds {sum(in_warm.values())} documents, as cold expects"
    await unsync_weeks(comps.pool, short)
    stats = await demote(comps.pool, comps.es, layout)
    return (f"re-indexed {stats.rows} URLs of {len(short)} short week(s) "
            f"({', '.join(short)})" + (f" ({stats.error})" if stats.error else ""))


async def recover(comps: Components, run: StepRunner = run_directly) -> RecoveryReport:
    """Run every step (each through ``run``: a task run of its own in a flow); see the
    module docstring."""
    report = RecoveryReport()
    t0 = time.monotonic()

    async def step(name: str, fn: Callable[[], Awaitable[Any]],
                   describe: Callable[[Any], str]) -> None:
        s0 = time.monotonic()
        result = await run(name, fn)
        report.steps.append(StepResult(name, time.monotonic() - s0, describe(result)))

    await step("reclaim expired leases",  # and those of runs that stopped beating
               lambda: comps.frontier.reclaim(dead_after=DEAD_AFTER), lambda n: f"{n} tasks")
    await step("rebuild hot ready queues", lambda: rebuild_queues(comps), lambda n: f"{n} tasks")
    report.resumed_after_s = time.monotonic() - t0
    await step("restore sessions", lambda: restore_sessions(comps.redis, comps.pool),
               lambda n: f"{n} sources")
    spool = Spool.of_state(comps.runtime.settings.state_path)
    await step("drain spool", lambda: drain(spool, comps.pool, comps.ledger),
               lambda r: f"{r.rows} rows from {r.files} files")
    await step("rebuild Bloom filter", lambda: rebuild_bloom(comps),
               lambda n: f"{n} URLs" if n else "already complete")
    await step("re-index warm where short of cold", lambda: reindex_warm(comps), str)
    report.seconds = time.monotonic() - t0
    return report
