"""One crawl run: seed, fetch, stage, discover from staged list pages, until idle or time.

The same steps serve ``stratacrawl crawl``, the demo and the Prefect flows (discovery,
fetch, staging-load): each is a function here over open :class:`Components`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import zstandard

from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.pool import make_pool
from stratacrawl.cold.runs import BEAT_S, DEAD_AFTER, Runs, new_run_id
from stratacrawl.cold.staging import claim_undiscovered, has_undiscovered, mark_discovered
from stratacrawl.cold.tasks import NewTask
from stratacrawl.components import Components
from stratacrawl.fetch.politeness import Politeness, SourceHeld
from stratacrawl.fetch.robots import RobotsCache
from stratacrawl.fetch.worker import FetchWorker, SourceStats
from stratacrawl.frontier.discovery import DiscoveryStats
from stratacrawl.frontier.links import extract
from stratacrawl.frontier.recrawl import FRESH_CADENCES, GROW, SHRINK
from stratacrawl.hot.throttle import effective_rates
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.monitor.web import serve as serve_metrics
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.staging.loader import DrainReport, drain
from stratacrawl.staging.spool import Spool
from stratacrawl.staging.writer import DB_DOWN, RETRYABLE, StagingWriter, WriterStats
from stratacrawl.tiers.demotion import DemoteStats, demote
from stratacrawl.tiers.eviction import evict_hot
from stratacrawl.urls import InvalidURL, canonical_fingerprint, canonicalize, check_target

log = logging.getLogger(__name__)
EVICT_CHECK_EVERY_S = 60.0
RECLAIM_EVERY_S = 5.0  # a dead run's tasks go back to the living this often
END_DEMOTION_S = 60.0  # how long a crawl demotes at its end; the demotion deployment does the rest
IDLE_HORIZON = timedelta(seconds=60)  # work due this soon still keeps a crawl from idling


@dataclass
class CrawlReport:
    seconds: float = 0.0
    discovery: DiscoveryStats = field(default_factory=DiscoveryStats)
    sources: dict[str, SourceStats] = field(default_factory=dict)
    writer: WriterStats | None = None
    spool: DrainReport | None = None
    demoted: int = 0          # URL states indexed in warm during the run
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)  # every request
    active: dict[Any, str] = field(default_factory=dict)  # the worker's running batches
    # sources 429s slowed down: id -> (effective rate, seconds still held by Retry-After)
    throttled: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """What one crawl did, as JSON (``crawl --json``; the load test merges workers)."""
        reasons: Counter[str] = Counter()
        retries: Counter[str] = Counter()
        for st in self.sources.values():
            reasons.update(st.reasons)
            retries.update(st.retries)
        return {"seconds": round(self.seconds, 3), "fetched": self.fetched,
                "ok": sum(s.ok for s in self.sources.values()),
                "not_modified": sum(s.not_modified for s in self.sources.values()),
                "failed": sum(s.failed for s in self.sources.values()),
                "landed": self.writer.landed if self.writer else 0,
                "lost_leases": self.writer.lost_leases if self.writer else 0,
                "spooled": self.writer.spooled if self.writer else 0,
                "flushes": self.writer.flushes if self.writer else 0,
                "flush_seconds": round(self.writer.flush_seconds, 3) if self.writer else 0.0,
                "queued": self.discovery.queued, "demoted": self.demoted,
                "redundant": sum(s.redundant for s in self.sources.values()),
                "over_budget": sum(s.over_budget for s in self.sources.values()),
                "reasons": dict(reasons), "retries": dict(retries),
                "throttled": {k: {"rate": round(r, 3), "held_s": round(h, 1)}
                              for k, (r, h) in self.throttled.items()},
                "latency": self.latency.to_json()}

    @property
    def fetched(self) -> int:
        return sum(s.fetched for s in self.sources.values())


async def demote_safe(comps: Components, max_rounds: int | None = None) -> DemoteStats:
    """Demotion that never stops a crawl: PostgreSQL or Elasticsearch away → try later."""
    try:
        return await demote(comps.pool, comps.es, comps.runtime.layout, max_rounds=max_rounds)
    except DB_DOWN as e:
        log.warning("crawl: demotion paused (%s)", e)
        return DemoteStats(error=str(e))


async def demote_at_end(comps: Components, budget_s: float | None = None) -> int:
    """A crawl's last step: committed fetches into warm, a batch at a time for up to
    ``budget_s``; what is left is the ``demotion`` deployment's (the watermark keeps it).
    Unbounded, a worker ending a 30-minute load test demoted every worker's ~390 k rows
    first and was stopped before it could report."""
    deadline = time.monotonic() + (END_DEMOTION_S if budget_s is None else budget_s)
    total = 0
    while time.monotonic() < deadline:
        rows = (await demote_safe(comps, max_rounds=1)).rows
        total += rows
        if not rows:  # none left, another process demoting, or warm away
            break
    return total


async def evict_safe(comps: Components) -> None:
    """Hot eviction when Redis is over ``STRATACRAWL_HOT_BUDGET_MB``; never stops a crawl."""
    try:
        stats = await evict_hot(comps.redis, comps.pool,
                                budget_mb=comps.runtime.settings.hot_budget_mb)
        if stats.evicted:
            log.info("crawl: evicted %d hot URL states (%.0f → %.0f MB)", stats.evicted,
                     stats.used_before_mb, stats.used_after_mb)
    except Exception as e:  # hot is a cache: try again next round
        log.warning("crawl: hot eviction failed: %s", e)


async def keep_leases(comps: Components, owner: str, stop: asyncio.Event) -> None:
    """Renew ``owner``'s leases every third of a lease time (batches running, pages waiting
    in the staging writer) and reclaim expired ones (a worker killed mid-batch) every
    ``RECLAIM_EVERY_S``, until ``stop``. Neither ever stops a crawl. Upkeep has a
    connection of its own: queued behind a thousand batches for the shared pool, a
    renewal came too late and live workers lost their leases (the load test's duplicates)."""
    async with make_pool(comps.runtime.database_url, max_size=1, name="lease-upkeep") as pool:
        await _keep_leases(comps, owner, stop, Ledger(pool=pool), Runs(pool=pool))


async def _keep_leases(comps: Components, owner: str, stop: asyncio.Event,
                       ledger: Ledger, runs: Runs) -> None:
    """The loop of :func:`keep_leases`; it also beats this run's heartbeat every
    ``BEAT_S``. Dead runs' leases are reclaimed only once this run has beaten for
    ``DEAD_AFTER`` without a gap: after a PostgreSQL outage every run's last beat is old,
    and the living must get a beat in before anyone counts them dead."""
    lease_s = comps.frontier.lease.total_seconds()
    renew_every = max(0.2, lease_s / 3)
    next_renewal = time.monotonic() + renew_every
    next_reclaim = next_beat = time.monotonic()
    healthy_since: float | None = None
    while not stop.is_set():
        now = time.monotonic()
        try:
            if now >= next_beat:
                next_beat = now + BEAT_S
                if healthy_since is None:
                    await runs.start(owner)
                    healthy_since = time.monotonic()
                else:
                    await runs.beat(owner)
            if now >= next_renewal:
                next_renewal = now + renew_every
                renewed, gone = await comps.frontier.renew(owner, ledger)
                log.debug("crawl: %d leases renewed, %d ended", renewed, gone)
            if now >= next_reclaim:
                next_reclaim = now + min(RECLAIM_EVERY_S, renew_every)
                steady = healthy_since is not None and (
                    time.monotonic() - healthy_since >= DEAD_AFTER.total_seconds())
                if n := await comps.frontier.reclaim(ledger, DEAD_AFTER if steady else None):
                    log.info("crawl: %d leases reclaimed (expired, or their run is dead)", n)
        except (*DB_DOWN, *RETRYABLE) as e:  # PostgreSQL away or busy: next round
            healthy_since = None
            log.warning("crawl: lease upkeep paused (%s)", e)
        except Exception as e:  # Redis away: the ledger is what counts
            log.warning("crawl: lease upkeep failed (%r)", e)
        wait = min(next_renewal, next_reclaim, next_beat) - time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=max(0.05, wait))


def spool_for(comps: Components) -> Spool:
    return Spool.of_state(comps.runtime.settings.state_path)


MINE_EVERY_S = 0.5  # how often a crawl learns URL rules (a source's passes pace themselves)

SEED_CONCURRENCY = 128  # sources seeded at once (robots.txt + seeds: one host each)


async def seed(comps: Components, sources: SourcesFile, robots: RobotsCache,
               politeness: Politeness) -> DiscoveryStats:
    """Seeds into the ledger, lists due again re-armed, sitemaps named in robots.txt queued.

    Sources are seeded side by side: each one may wait on a slow robots.txt.
    """
    stats = DiscoveryStats()
    gate = asyncio.Semaphore(SEED_CONCURRENCY)

    async def one(source: Source) -> None:
        async with gate:
            stats.merge(await comps.discovery.seed(source))
            if not source.sitemaps:
                return
            sitemaps: list[NewTask] = []
            named: set[str] = set()

            async def turn() -> float:
                return await politeness.wait_turn(source.id, source.rate)

            private_ok = source.allow_private_networks
            for seed_url in source.seeds:
                try:  # robots.txt and the sitemaps it names: the same checks as any fetch
                    named |= set((await robots.check(seed_url, turn,
                                                     allow_private=private_ok)).sitemaps)
                except InvalidURL as e:
                    stats.dropped[e.reason] += 1
                except SourceHeld:  # Retry-After: its sitemaps wait for the next seeding
                    break
            for url in named:
                try:
                    canonical = canonicalize(url)
                    check_target(canonical, allow_private=private_ok)
                    if source.allow and not source.matches("allow", canonical):
                        raise InvalidURL(url, "out-of-scope")
                    sitemaps.append(NewTask(source.id, url, canonical_fingerprint(canonical),
                                            "sitemap", source.priority))
                except InvalidURL as e:
                    stats.dropped[e.reason] += 1
            stats.queued += await comps.frontier.add(sitemaps)

    await asyncio.gather(*(one(s) for s in sources.sources))
    return stats


async def discover_staged(comps: Components, sources: SourcesFile,
                          limit: int = 200) -> DiscoveryStats:
    """Links of staged seed/list/sitemap pages not yet discovered → frontier; marks them done.

    Rows are claimed with SKIP LOCKED, so several discoverers can run; re-running after a
    crash re-discovers a page at most, and dedup makes that harmless.
    """
    stats = DiscoveryStats()
    decompress = zstandard.ZstdDecompressor()
    grades: list[tuple[int, bool, float, float]] = []  # adaptive re-crawl of the list pages
    async with comps.pool.connection() as conn, conn.transaction():
        rows = await claim_undiscovered(conn, limit)
        for _at, _id, source_id, url, final_url, ctype, body, task_id in rows:
            if source_id not in sources.ids or body is None:
                continue
            source = sources.get(source_id)
            links = extract(decompress.decompress(body), ctype)
            floor = source.cadence_td.total_seconds()
            page = await comps.discovery.discover(source, final_url or url, links,
                                                  fresh_s=FRESH_CADENCES * floor)
            stats.merge(page)
            if source.recrawl.adaptive:
                grades.append((task_id, page.queued + page.requeued + page.fresh > 0,
                               floor, source.max_interval_td.total_seconds()))
        await mark_discovered(conn, rows)
    await comps.ledger.grade_lists(grades, SHRINK, GROW)
    return stats


async def mine_url_rules(comps: Components, sources: SourcesFile, *,
                         force: bool = False) -> None:
    """Learn each source's URL rules from what was fetched since the last pass."""
    for source in sources.sources:
        if not source.url_rules.learn:
            continue
        try:
            await comps.url_rules.mine(source.id, source.url_rules.forbidden, force=force)
        except Exception as e:  # learning is an optimisation: the crawl goes on without it
            log.warning("crawl: URL rules of %s not mined (%r)", source.id, e)


async def drain_spool(comps: Components) -> DrainReport:
    return await drain(spool_for(comps), comps.pool, comps.ledger)


class CrawlRun:
    """What runs beside the fetching in one crawl process: the discovery loop (staged list
    pages → frontier, with the periodic chores: the sources' effective rates, demotion,
    eviction, URL-rule mining, the spool), and the idle check that ends an ``until_idle``
    crawl."""

    def __init__(self, comps: Components, sources: SourcesFile, writer: StagingWriter,
                 run_id: str, report: CrawlReport,
                 progress: Callable[[CrawlReport], None] | None = None) -> None:
        self.comps = comps
        self.sources = sources
        self.writer = writer
        self.run_id = run_id
        self.report = report
        self.progress = progress
        # One discovery at a time in this process: the idle check must not look at the
        # ledger while the loop holds list pages locked and their links are not yet tasks.
        self.discovering = asyncio.Lock()
        now = time.monotonic()
        self._demote_every = comps.runtime.settings.demote_every_s
        self._next = {"rates": 0.0, "mining": now + MINE_EVERY_S,
                      "demotion": now + self._demote_every if self._demote_every else math.inf,
                      "eviction": now + EVICT_CHECK_EVERY_S}

    def _due(self, chore: str, every: float) -> bool:
        now = time.monotonic()
        if now < self._next[chore]:
            return False
        self._next[chore] = now + every
        return True

    async def chores(self) -> None:
        """The periodic work of a crawl, each when its time comes."""
        if self._due("rates", 1.0):   # what 429s did to the sources' pace
            with contextlib.suppress(Exception):  # Redis away: shown next time
                self.report.throttled = await effective_rates(
                    self.comps.redis, {s.id: s.rate for s in self.sources.sources})
        if self._demote_every and self._due("demotion", self._demote_every):
            self.report.demoted += (await demote_safe(self.comps, max_rounds=1)).rows
        if self._due("eviction", EVICT_CHECK_EVERY_S):   # hot over its budget → evict
            await evict_safe(self.comps)
        if self._due("mining", MINE_EVERY_S):   # fetched pages → URL rules
            await mine_url_rules(self.comps, self.sources)

    async def discover_loop(self, stop: asyncio.Event) -> None:
        spool = spool_for(self.comps)
        while not stop.is_set():
            await self.chores()
            try:
                if not self.writer.degraded and spool.pending():
                    drained = await drain_spool(self.comps)
                    log.info("crawl: drained %d spooled rows", drained.rows)
                async with self.discovering:
                    found = await discover_staged(self.comps, self.sources)
            except DB_DOWN as e:  # PostgreSQL away: the writer spools; try again soon
                log.warning("crawl: discovery paused (%s)", e)
                await asyncio.sleep(1.0)
                continue
            self.report.discovery.merge(found)
            if self.progress:
                self.progress(self.report)
            if not found.links:
                await asyncio.sleep(0.3)

    async def idle(self) -> bool:
        """Whether nothing is left for this crawl: all landed, discovered, and nothing due
        within ``IDLE_HORIZON`` (nor leased to another live run)."""
        comps, sources = self.comps, self.sources
        await self.writer.flush()
        if self.writer.degraded or spool_for(comps).pending():
            return False  # what is spooled still has to land
        try:
            async with self.discovering:
                found = await discover_staged(comps, sources, limit=10_000)
            self.report.discovery.merge(found)
            if found.queued or found.requeued or await has_undiscovered(comps.pool, sources.ids):
                return False  # another process is still turning list pages into tasks
            if held := await comps.ledger.leased_by_others(sources.ids, self.run_id):
                # Other runs' batches may still fail or find links; a dead run's leases
                # (one under this very name, killed before this run started, too) are
                # reclaimed within seconds of its heartbeat going stale. Not idle yet.
                log.debug("crawl: idle here, waiting for %d tasks leased elsewhere", held)
                return False
            # Idle means nothing due within the next retry step either: a task that
            # failed a moment ago (30 s, then 60 s) or was told to wait by a 429 is
            # part of this crawl, not work for the next one.
            return not await comps.ledger.sources_with_due_work(sources.ids, IDLE_HORIZON)
        except DB_DOWN:
            return False

    async def finish(self) -> None:
        """After the fetching: this run's leases back to the others, the last pages
        discovered and mined, what it committed demoted (within a bound)."""
        comps, sources = self.comps, self.sources
        # The writer has landed all it held: what this run still leases (batches cut
        # short) goes back to the others at their next reclaim, not after a lease time.
        with contextlib.suppress(*DB_DOWN, *RETRYABLE):
            await Runs(pool=comps.pool).end(self.run_id)
        self.report.discovery.merge(await discover_staged(comps, sources, limit=10_000))
        with contextlib.suppress(*DB_DOWN):   # the last pages landed: the next crawl knows them
            await mine_url_rules(comps, sources, force=True)
        self.report.demoted += await demote_at_end(comps)


async def crawl(comps: Components, sources: SourcesFile, *, until_idle: bool = True,
                seconds: float | None = None, worker_id: str | None = None,
                progress: Callable[[CrawlReport], None] | None = None,
                flush_rows: int = 1000, flush_s: float = 5.0,
                report: CrawlReport | None = None) -> CrawlReport:
    """Discovery and fetch together until nothing is due (or ``seconds`` pass);
    ``report`` (if given) is filled in as the crawl goes."""
    worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
    run_id = new_run_id(worker_id)  # leases, slots and heartbeat: this process's, not the name's
    report = report if report is not None else CrawlReport()
    t0 = time.monotonic()
    report.spool = await drain_spool(comps)
    async with StagingWriter(pool=comps.pool, ledger=comps.ledger, frontier=comps.frontier,
                             hot_urls=comps.hot_urls, spool=spool_for(comps), owner=run_id,
                             flush_rows=flush_rows, flush_s=flush_s,
                             parallel=comps.runtime.settings.staging_flushes) as writer:
        worker = FetchWorker.of(comps, sources=sources, writer=writer, worker_id=worker_id,
                                run_id=run_id)
        report.sources = worker.stats
        report.latency = worker.latency
        report.active = worker.active
        report.writer = writer.stats
        report.discovery.merge(await seed(comps, sources, worker.robots, worker.politeness))
        run = CrawlRun(comps, sources, writer, run_id, report, progress)
        stop = asyncio.Event()
        discoverer = asyncio.create_task(run.discover_loop(stop))
        leases = asyncio.create_task(keep_leases(comps, run_id, stop))
        port = comps.runtime.settings.worker_metrics_port
        exporter = asyncio.create_task(serve_metrics(comps, sources, port=port, stop=stop)) \
            if port else None
        try:
            await worker.run(until_idle=until_idle, seconds=seconds, idle_check=run.idle)
        finally:
            stop.set()
            await discoverer
            await leases
            if exporter is not None:
                await exporter
    await run.finish()
    report.seconds = time.monotonic() - t0
    if progress:
        progress(report)
    return report
