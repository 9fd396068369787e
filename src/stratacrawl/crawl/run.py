"""One crawl run: seed, fetch, stage, discover from staged list pages, until idle or
time. :class:`CrawlRun` is what runs beside the fetching (the discovery loop and its
chores, the idle check, the end); :func:`crawl` puts it together with a fetch worker, the
staging writer and the lease upkeep."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

from stratacrawl.cold.runs import new_run_id
from stratacrawl.cold.staging import has_undiscovered
from stratacrawl.crawl.report import CrawlReport
from stratacrawl.crawl.steps import (
    AWAY,
    demote_at_end,
    demote_safe,
    discover_staged,
    drain_spool,
    evict_safe,
    mine_url_rules,
    seed_sitemaps,
    seed_tasks,
)
from stratacrawl.fetch.leases import keep_leases
from stratacrawl.frontier.discovery import DiscoveryStats
from stratacrawl.monitor.web import serve as serve_metrics
from stratacrawl.sources import SourcesFile
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.tier_errors import POSTGRES_AWAY, POSTGRES_BUSY
from stratacrawl.wiring import Components

log = logging.getLogger(__name__)
EVICT_CHECK_EVERY_S = 60.0
MINE_EVERY_S = 0.5  # how often a crawl learns URL rules (a source's passes pace themselves)
IDLE_HORIZON = timedelta(seconds=60)  # work due this soon still keeps a crawl from idling
# Staged list pages wait for the discovery loop only when the list hop could not take
# them (a tier away) or another process staged them. This process's own are looked for
# as soon as its writer lands one; other processes' (a killed crawl's, a spool drained
# elsewhere) every OTHERS_EVERY_S — a poll is a transaction of three statements, and
# polling every 0.3 s cost ~0.3 round trips a page on sites that answer in seconds.
OTHERS_EVERY_S = 2.0
POLL_S = 0.3


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
        self.sitemaps: asyncio.Task[None] | None = None   # see ``read_sitemaps``
        now = time.monotonic()
        self._demote_every = comps.runtime.settings.demote_every_s
        self._landed_awaiting = 0   # the writer's count of pages it landed undiscovered
        self._next = {"rates": 0.0, "mining": now + MINE_EVERY_S, "others": 0.0,
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
                self.report.throttled = await self.comps.politeness.effective_rates(
                    {s.id: s.rate for s in self.sources.sources})
        if self._demote_every and self._due("demotion", self._demote_every):
            self.report.demoted += (await demote_safe(self.comps, max_rounds=1)).rows
        if self._due("eviction", EVICT_CHECK_EVERY_S):   # hot over its budget → evict
            await evict_safe(self.comps)
        if self._due("mining", MINE_EVERY_S):   # fetched pages → URL rules
            await mine_url_rules(self.comps, self.sources)

    def _staging_to_read(self) -> bool:
        """Whether staging may hold list pages waiting for discovery: this process's
        writer landed some since the last look, or it is time to look for other
        processes' (see ``OTHERS_EVERY_S``)."""
        landed = self.writer.stats.awaiting_discovery
        if landed != self._landed_awaiting:
            self._landed_awaiting = landed
            self._next["others"] = time.monotonic() + OTHERS_EVERY_S
            return True
        return self._due("others", OTHERS_EVERY_S)

    def read_sitemaps(self, on_queued: Callable[[str], None]) -> None:
        """Queue the sitemaps the sources' robots.txt name, beside the fetching: a source
        whose robots.txt answers slowly holds up no other source's first pages (each is
        fetched once its own robots.txt is in), and the crawl is not idle until they are
        queued (``on_queued``: told each source that has some). A tier away leaves them
        to the next crawl's seeding."""
        async def read() -> None:
            try:
                self.report.discovery.merge(
                    await seed_sitemaps(self.comps, self.sources, on_queued))
            except AWAY as e:
                log.warning("crawl: sitemaps not read (%r); the next seeding reads them", e)

        self.sitemaps = asyncio.create_task(read())

    async def sitemaps_done(self) -> None:
        """The sitemaps' reading ended: awaited after an idle end (it is over by then),
        cancelled after a stop or the time limit; an error it raised, raised here."""
        if self.sitemaps is None:
            return
        if not self.sitemaps.done():
            self.sitemaps.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.sitemaps

    async def discover_loop(self, stop: asyncio.Event) -> None:
        spool = self.comps.spool
        while not stop.is_set():
            await self.chores()
            found = DiscoveryStats()
            try:
                if not self.writer.degraded and spool.pending():
                    drained = await drain_spool(self.comps)
                    log.info("crawl: drained %d spooled rows", drained.rows)
                    if self.report.spool is not None:
                        self.report.spool.merge(drained)
                    self._next["others"] = 0.0   # its list pages: at once
                if self._staging_to_read():
                    async with self.discovering:
                        found = await discover_staged(self.comps, self.sources,
                                                      hops=self.report.hops)
            except AWAY as e:  # a tier away (the writer spools): soon again
                log.warning("crawl: discovery paused (%r)", e)
                self._next["others"] = 0.0   # staging is read again on the next pass
                await _nap(stop, 1.0)
                continue
            self.report.discovery.merge(found)
            if self.progress:
                self.progress(self.report)
            if found.links:
                self._next["others"] = 0.0   # more may wait behind them
            else:
                await _nap(stop, POLL_S)

    async def idle(self) -> bool:
        """Whether nothing is left for this crawl: all landed, discovered, and nothing due
        within ``IDLE_HORIZON`` (nor leased to another live run)."""
        comps, sources = self.comps, self.sources
        if self.sitemaps is not None and not self.sitemaps.done():
            return False   # robots.txt still to answer: its sitemaps are work of this crawl
        await self.writer.flush()
        if self.writer.degraded or comps.spool.pending():
            return False  # what is spooled still has to land
        try:
            async with self.discovering:
                found = await discover_staged(comps, sources, limit=10_000,
                                              hops=self.report.hops)
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
        except AWAY:
            return False

    async def finish(self) -> None:
        """After the fetching: this run's leases back to the others, the last pages
        discovered and mined, what it committed demoted (within a bound)."""
        comps, sources = self.comps, self.sources
        # The writer has landed all it held: what this run still leases (batches cut
        # short) goes back to the others at their next reclaim, not after a lease time.
        with contextlib.suppress(*POSTGRES_AWAY, *POSTGRES_BUSY):
            await comps.runs.end(self.run_id)
        with contextlib.suppress(*AWAY):  # else the next crawl discovers them
            self.report.discovery.merge(await discover_staged(comps, sources, limit=10_000,
                                                              hops=self.report.hops))
        with contextlib.suppress(*AWAY):  # the last pages landed: learn from them
            await mine_url_rules(comps, sources, force=True)
        self.report.demoted += await demote_at_end(comps)


async def _nap(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile: the crawl's end waits for
    this loop, and a plain sleep kept it up to a poll longer after its last page."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def crawl(comps: Components, sources: SourcesFile, *, until_idle: bool = True,
                seconds: float | None = None, worker_id: str | None = None,
                progress: Callable[[CrawlReport], None] | None = None,
                flush_rows: int = 1000, flush_s: float = 5.0,
                report: CrawlReport | None = None,
                stop: asyncio.Event | None = None) -> CrawlReport:
    """Discovery and fetch together until nothing is due (or ``seconds`` pass, or ``stop``
    is set: a signal); ``report`` (if given) is filled in as the crawl goes. However it
    ends, in-flight batches land what they fetched and give the rest back, the writer
    flushes and the run's leases are released before it returns."""
    worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
    run_id = new_run_id(worker_id)  # leases, slots and heartbeat: this process's, not the name's
    report = report if report is not None else CrawlReport()
    t0 = time.monotonic()
    report.spool = await drain_spool(comps)
    async with StagingWriter(pool=comps.pool, frontier=comps.frontier,
                             hot_urls=comps.hot_urls, spool=comps.spool, owner=run_id,
                             flush_rows=flush_rows, flush_s=flush_s,
                             parallel=comps.runtime.settings.staging_flushes) as writer:
        worker = comps.fetch_worker(sources=sources, writer=writer, worker_id=worker_id,
                                    run_id=run_id, on_discovered=report.discovery.merge)
        if worker.hop is not None:
            report.hops = worker.hop.hops
        report.sources = worker.stats
        report.latency = worker.latency
        report.in_flight = worker.slots.held
        report.writer = writer.stats
        report.discovery.merge(await seed_tasks(comps, sources))
        run = CrawlRun(comps, sources, writer, run_id, report, progress)
        run.read_sitemaps(on_queued=worker.new_work)
        done = asyncio.Event()   # the fetching is over: the loops beside it end
        discoverer = asyncio.create_task(run.discover_loop(done))
        leases = asyncio.create_task(keep_leases(comps.frontier, comps.upkeep_stores, run_id,
                                                 done))
        port = comps.runtime.settings.worker_metrics_port
        exporter = asyncio.create_task(serve_metrics(
            comps.redis, comps.pool, sources, port=port, stop=done)) if port else None
        try:
            await worker.run(until_idle=until_idle, seconds=seconds, idle_check=run.idle,
                             stop=stop)
        finally:
            done.set()
            await run.sitemaps_done()
            await discoverer
            await leases
            if exporter is not None:
                await exporter
    await run.finish()
    end = time.monotonic()
    report.seconds = end - t0
    if worker.last_fetch_at is not None:
        report.tail_s = end - worker.last_fetch_at
    if progress:
        progress(report)
    return report
