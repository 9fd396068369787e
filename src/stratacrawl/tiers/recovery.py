"""Recovery: idempotent, safe at any time, each step timed.

Cold is the truth; hot and warm are rebuilt from it. Order matters for how fast work
resumes: leases and ready queues first (fetching resumes), then sessions and the spool,
then the Bloom filter (streamed from cold; dedup takes the exact path until it is marked
ready, so it is never wrong meanwhile), then warm wherever it holds less than cold expects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.runs import DEAD_AFTER
from stratacrawl.cold.url_state import (
    all_url_hashes,
    outbox_urls,
    synced_per_week,
    unsync_weeks,
)
from stratacrawl.fetch.sessions import restore_sessions
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.hot.bloom import BloomFilter
from stratacrawl.hot.client import HotRedis
from stratacrawl.staging.loader import DamagedFile, DrainReport, drain
from stratacrawl.staging.spool import Spool
from stratacrawl.step_runner import StepRunner, run_directly
from stratacrawl.tiers.demotion import demote
from stratacrawl.warm.indices import FAMILIES
from stratacrawl.warm.store import WarmStore

BLOOM_CHUNK = 100_000
# Sources whose windows are refilled at once (each a ledger read and a Redis write).
REFILLS_AT_ONCE = 8
# Batches a recovery re-indexes into warm itself (100,000 URLs); the rest of a refill
# waits in the warm outbox for the demotion deployment.
REFILL_BATCH = 5000
REFILL_NOW_ROUNDS = 20


@dataclass
class StepResult:
    name: str
    seconds: float
    result: str


@dataclass
class RecoveryReport:
    steps: list[StepResult] = field(default_factory=list)
    resumed_after_s: float = 0.0     # ready queues rebuilt: fetching can resume
    spool_damaged: list[DamagedFile] = field(default_factory=list)   # set aside, not loaded
    seconds: float = 0.0

    def lines(self) -> list[str]:
        return [f"{s.name}: {s.result} ({s.seconds:.2f} s)" for s in self.steps]


class Recovery:
    """The recovery steps over the stores they rebuild: ``frontier``'s ready queues from
    ``ledger``, ``bloom`` from the URL state in ``pool``, the sessions into ``redis``, the
    ``spool``, and ``warm``'s weekly indices for URLs within
    ``retention``."""

    def __init__(self, *, ledger: Ledger, frontier: Frontier, bloom: BloomFilter,
                 redis: HotRedis, pool: AsyncConnectionPool, warm: WarmStore,
                 retention: timedelta, spool: Spool) -> None:
        self.ledger = ledger
        self.frontier = frontier
        self.bloom = bloom
        self.redis = redis
        self.pool = pool
        self.warm = warm
        self.retention = retention
        self.spool = spool

    async def rebuild_queues(self) -> int:
        """Every source's ready window from the ledger, each sized for this many sources."""
        sources = await self.ledger.sources_with_ready_tasks()
        self.frontier.fit_window(len(sources))
        gate = asyncio.Semaphore(REFILLS_AT_ONCE)

        async def refill(source_id: str) -> int:
            async with gate:
                return await self.frontier.refill(source_id, force=True)

        return sum(await asyncio.gather(*(refill(s) for s in sources)))

    async def rebuild_bloom(self) -> int:
        """Every URL cold knows, streamed into the filter; then the filter is marked ready."""
        if await self.bloom.is_ready():
            return 0
        async with all_url_hashes(self.pool, BLOOM_CHUNK) as chunks:
            added = await self.bloom.add_all(chunks)
        await self.bloom.mark_ready()
        return added

    async def reindex_warm(self) -> str:
        """Warm is rebuilt from cold wherever it holds less than cold says it should: per
        weekly index of each family (``url_dedup`` and ``url_meta``: a URL has a document
        in both), the documents warm counts against the rows cold marked synced for that
        week and still within the warm retention (older ones sank to cold on purpose). A
        week that came up short in either family — an embedded API server restarted
        empty, an index lost or wiped while a crawl went on — is re-indexed from cold
        (both documents, by ``_id``: idempotent).

        A re-index is queued in the warm outbox before it starts, so one interrupted
        (kill -9, SIGTERM) leaves its rest there, no longer counted as synced: warm then
        holds what cold counts, and the outbox is what is missing. With nothing short, a
        non-empty outbox is indexed here too (bounded like a re-index), so the next
        recovery finishes what the last one began."""
        try:
            in_warm = {family: await self.warm.docs_per_week(family)
                       for family in FAMILIES}
        except Exception as e:
            return f"warm unavailable ({type(e).__name__}); backfill later"
        expected = await synced_per_week(self.pool, self.retention)
        short = {family: sorted(week for week, n in expected.items() if docs.get(week, 0) < n)
                 for family, docs in in_warm.items()}
        weeks = sorted(set().union(*short.values()))
        if not weeks:
            held = ", ".join(f"{sum(docs.values())} {family}" for family, docs in in_warm.items())
            waiting = await outbox_urls(self.pool)
            if not waiting:
                return f"warm holds {held} documents, as cold expects"
            stats = await demote(self.pool, self.warm, limit=REFILL_BATCH,
                                 max_rounds=REFILL_NOW_ROUNDS)
            rest = (f"; the other ~{waiting - stats.rows} wait for the demotion deployment"
                    if stats.rows < waiting else "")
            return (f"warm held {held} documents; indexed {stats.rows} of the {waiting} URLs "
                    f"waiting in the warm outbox (an interrupted re-index or pending "
                    f"demotion){rest}" + (f" ({stats.error})" if stats.error else ""))
        await unsync_weeks(self.pool, weeks)
        queued = sum(expected[w] for w in weeks)
        # Bounded: recovery re-indexes the first REFILL_NOW_ROUNDS batches itself; the rest
        # waits in the warm outbox (durable, so the refill resumes wherever it stopped) for
        # the `demotion` deployment or `stratacrawl demote`. Dedup answers from cold for
        # what warm does not hold meanwhile.
        stats = await demote(self.pool, self.warm, limit=REFILL_BATCH,
                             max_rounds=REFILL_NOW_ROUNDS)
        where = "; ".join(f"{family} short in {', '.join(w)}" for family, w in short.items() if w)
        rest = (f"; the other ~{queued - stats.rows} wait in the warm outbox for the demotion "
                "deployment (or `stratacrawl demote`)" if stats.rows < queued else "")
        return (f"re-indexed {stats.rows} of {queued} URLs of {len(weeks)} short week(s) "
                f"({where}){rest}" + (f" ({stats.error})" if stats.error else ""))

    async def run(self, runner: StepRunner = run_directly) -> RecoveryReport:
        """Every step (each through ``runner``: a task run of its own in a flow); see the
        module docstring."""
        report = RecoveryReport()
        t0 = time.monotonic()

        async def step(name: str, fn: Callable[[], Awaitable[Any]],
                       describe: Callable[[Any], str]) -> None:
            s0 = time.monotonic()
            result = await runner(name, fn)
            report.steps.append(StepResult(name, time.monotonic() - s0, describe(result)))

        await step("reclaim expired leases",  # and those of runs that stopped beating
                   lambda: self.frontier.reclaim(dead_after=DEAD_AFTER), lambda n: f"{n} tasks")
        await step("re-queue tasks failed by a tier outage",
                   self.ledger.requeue_tier_failures, lambda ids: f"{len(ids)} tasks")
        await step("rebuild hot ready queues", self.rebuild_queues, lambda n: f"{n} tasks")
        report.resumed_after_s = time.monotonic() - t0
        await step("restore sessions", lambda: restore_sessions(self.redis, self.pool),
                   lambda n: f"{n} sources")
        spool = self.spool

        def drained(r: DrainReport) -> str:
            report.spool_damaged = r.damaged
            return r.summary()

        await step("drain spool", lambda: drain(spool, self.pool), drained)
        await step("rebuild Bloom filter", self.rebuild_bloom,
                   lambda n: f"{n} URLs" if n else "already complete")
        await step("re-index warm where short of cold", self.reindex_warm, str)
        report.seconds = time.monotonic() - t0
        return report
