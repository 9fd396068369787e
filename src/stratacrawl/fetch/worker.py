"""A fetch worker: batches of one source, each fetched in lanes, concurrent across batches.

The worker loop claims a batch for every source with room, in the order and number the
scheduler gives (``fetch/claims.py``), and runs each: the tasks it should not fetch set
aside (``fetch/claims.py``), the rest fetched in lanes (``fetch/lanes.py``) under the source's
concurrency slots (``fetch/slots.py``), each request waiting its turn on the source's
shared pace; what a batch fetched becomes staging rows and ledger outcomes
(``fetch/recording.py``). A list page's links go into the frontier right after its fetch
(the list hop), and a source whose list pages queued work is claimed again at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from stratacrawl.cold.staging import to_discover
from stratacrawl.cold.tasks import Batch, ClaimedTask
from stratacrawl.fetch.claims import Claims, SetAside
from stratacrawl.fetch.fetcher import REDIRECT_OUT_OF_SCOPE, Fetcher, SourceClient
from stratacrawl.fetch.hop import ListHop
from stratacrawl.fetch.lanes import Lanes
from stratacrawl.fetch.outage import Outage
from stratacrawl.fetch.politeness import Politeness
from stratacrawl.fetch.recording import Fetched, Recorder, SourceStats
from stratacrawl.fetch.result import FetchResult
from stratacrawl.fetch.sessions import Sessions
from stratacrawl.fetch.slots import SPARE_S, Slots
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.recrawl import RecrawlBudget, changed
from stratacrawl.frontier.scheduler import Scheduler
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.hot.live import LiveMetrics
from stratacrawl.hot.url_state import HotURL, HotURLState
from stratacrawl.hot.workers import Heartbeat
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.tier_errors import TIER_DOWN

__all__ = ["FetchWorker", "SourceStats"]

log = logging.getLogger(__name__)
DRAIN_S = 10.0   # a stopping worker's in-flight requests get this long (STRATACRAWL_DRAIN_S)


class FetchWorker:
    """Fetches batches for ``sources``: claims them from ``frontier`` in the order and
    number ``scheduler`` gives, drops the variants ``url_rules`` make redundant and the
    re-fetches past the daily ``budget``, fetches through ``fetcher`` under the sources'
    ``politeness`` (Redis: pace and concurrency slots), and hands each page to
    ``writer``. ``hot_urls`` gives the validators of a conditional request; ``sessions``
    keeps the sites' cookies; ``outage`` tells whether a tier is away; ``live`` (None:
    off) records live counters. Built by ``Components.fetch_worker``."""

    def __init__(self, *, frontier: Frontier, scheduler: Scheduler, url_rules: UrlRules,
                 hot_urls: HotURLState, politeness: Politeness, fetcher: Fetcher,
                 budget: RecrawlBudget, sessions: Sessions, outage: Outage,
                 live: LiveMetrics | None, sources: SourcesFile, writer: StagingWriter,
                 worker_id: str, run_id: str | None = None, max_batches: int = 64,
                 hop: ListHop | None = None,
                 on_result: Callable[[str, FetchResult], None] | None = None,
                 drain_s: float = DRAIN_S) -> None:
        self.frontier = frontier
        self.hop = hop   # list pages' links into the frontier right after their fetch
        self.last_fetch_at: float | None = None   # time.monotonic() of the latest fetch
        self.scheduler = scheduler
        self.url_rules = url_rules
        self.hot_urls = hot_urls
        self.sources = sources
        self.writer = writer
        self.worker_id = worker_id  # the name: staging rows, heartbeats, traces
        self.run_id = run_id or worker_id  # this process: leases and slots
        self.max_batches = max_batches
        self.on_result = on_result
        self.fetcher = fetcher
        self.drain_s = drain_s
        self.outage = outage
        self.sessions = sessions
        self.slots = Slots(politeness=politeness, sources=sources, run_id=self.run_id)
        self.record = Recorder(frontier=frontier, writer=writer, sessions=sessions,
                               outage=outage, live=live, sources=sources,
                               worker_id=worker_id, run_id=self.run_id)
        self.stats = self.record.stats
        self.set_aside = SetAside(frontier=frontier, url_rules=url_rules, budget=budget,
                                  run_id=self.run_id)
        self.latency = LatencyHistogram()  # every request of this worker
        self.claims = Claims(frontier=frontier, scheduler=scheduler, slots=self.slots,
                             outage=outage, sources=sources, run_id=self.run_id,
                             max_batches=max_batches)
        self.active: dict[asyncio.Task[None], str] = {}  # running batch → its source
        self._finished: list[asyncio.Task[None]] = []  # done, not yet collected by run()
        self._lanes: dict[str, set[Lanes]] = {}   # by source: the lanes of its running batches
        self._wake = asyncio.Event()

    @property
    def stopping(self) -> bool:
        """Set when the worker stops (a signal, its time is up): batches fetch no further
        task, land what they fetched and give the rest back."""
        return self.slots.stopping

    # -- sessions (fetch/sessions.py) ---------------------------------------------------------
    @property
    def clients(self) -> dict[str, SourceClient]:
        return self.sessions.clients

    async def client_for(self, source: Source) -> SourceClient:
        return await self.sessions.client_for(source)

    async def close(self) -> None:
        await self.sessions.close()

    # -- batches ------------------------------------------------------------------------------
    async def run_batch(self, source: Source, batch: Batch, holder: str | None = None) -> None:
        """Fetch a claimed batch under the source's slot ``holder`` (held already: a claim
        takes it; taken here if None)."""
        if holder is None:
            holder = f"{self.run_id}:{batch.batch_id}"
            await self.slots.acquire(source, holder)
        fetched: Fetched = ([], [], {})
        own_given_up = False   # the lane on the batch's own slot gave it up (fetch/lanes.py)
        starting = True        # no lane yet: no claim of the source (Claims.starting)
        try:
            try:
                batch.tasks = await self.set_aside(source, batch, self.record.of(source.id))
                if not batch.tasks:
                    return
                client = await self.client_for(source)
                validators = await self.hot_urls.get_many([t.url_hash for t in batch.tasks])
                lanes = Lanes(self, source, batch, client, holder,
                              deque(zip(batch.tasks, validators, strict=True)), fetched)
                running = self._lanes.setdefault(source.id, set())
                running.add(lanes)
                self.claims.starting(source.id, -1)
                starting = False
                try:
                    await lanes.run()
                finally:
                    running.discard(lanes)
                    own_given_up = lanes.own_slot_given_up
            except TIER_DOWN as e:  # our tier, not the site: what was fetched lands
                self.outage.failed(e)
                await self.record.hand_over(source, batch, fetched, "tier-unavailable")
            except asyncio.CancelledError:  # the drain time is up: the same, then stop
                await self.record.hand_over(source, batch, fetched, "stopped")
                raise
            else:
                await self.record.hand_over(source, batch, fetched, "stopped")
        finally:
            if starting:
                self.claims.starting(source.id, -1)
            self.claims.batch_over(source.id, batch.batch_id)
            if not own_given_up:
                await self.slot_done(source.id, holder)

    # -- what the lanes ask (fetch/lanes.py) --------------------------------------------------
    async def more_slots(self, source: Source, batch: Batch, wanted: int) -> list[str]:
        """Up to ``wanted`` more slots for a batch's lanes: as many as the source has free
        now, within the worker's allowance of requests in flight."""
        return await self.slots.more(source, batch.batch_id,
                                     min(wanted, self.claims.allowance - self.slots.in_flight()))

    async def slot_done(self, source_id: str, holder: str) -> None:
        """A lane's slot given up: first to a running batch of the source with tasks
        waiting (a new lane of it), else a slot of this source is free, so claim more.
        Claimed first, it ran a new batch's tasks one after the other on that slot while
        the tasks of the batches before waited for theirs: the source's claimed work
        piled up (~8 tasks a slot on sites answering in seconds), and a list page found
        meanwhile waited behind all of it while slots of the source stood idle."""
        await self.slots.release(source_id, holder)
        source = self.sources.get(source_id)
        for lanes in list(self._lanes.get(source_id, ())):
            if self.slots.room(source) <= 0:
                break
            if lanes.lanes_wanted() > 0:
                await lanes.grow(now=True)
        self._wake.set()

    async def fetch_one(self, source: Source, client: SourceClient, task: ClaimedTask,
                        hot: HotURL | None, fetched: Fetched) -> None:
        """Fetch one task (a conditional request when ``hot`` has validators); its result
        and staging row into ``fetched``."""
        results, staged, news = fetched
        v = {"etag": hot.etag, "last_modified": hot.last_modified} if hot else {}
        result = await self.fetcher.fetch(client, source, task.url,
                                          {k: x for k, x in v.items() if x},
                                          trace_id=task.trace_id)
        at = self.last_fetch_at = time.monotonic()
        self.latency.add(result.elapsed_ms)
        self.claims.answered(source.id, result.elapsed_ms)
        if self.on_result:
            self.on_result(source.id, result)
        content_hash = (hashlib.blake2b(result.body, digest_size=16).hexdigest()
                        if result.body else None)
        same = changed(task.content_hash, result.status, content_hash) is False
        page = None
        if (self.hop is not None and result.final_url
                and result.verdict.reason == REDIRECT_OUT_OF_SCOPE):
            await self.hop.offer(source, result.final_url)
        if self.hop is not None and to_discover(result.verdict.success, task.kind,
                                                result.body, same):
            page = await self.hop(source, task, result, at)
            if page is not None:
                news[task.id] = page.news
                if page.queued or page.requeued:  # new work: claim it now, not in 1 s
                    self.new_work(source.id)
        item = self.record.staged(task, result, source, content_hash, same,
                            discovered=page is not None)  # compressed from here
        results.append((task, result))  # together: a cancelled batch lands what it holds
        staged.append(item)
        if content_hash and result.status == 200 and source.url_rules.learn:
            self.url_rules.observe(source.id, task.url, content_hash, item.canonical_url,
                                   self.run_id)
        result.release_body()
        if result.verdict.reason == "source-held":  # Retry-After: skip it till then
            self.claims.hold_off(source.id, result.verdict.retry_after_s or 0.0)

    # -- the loop -----------------------------------------------------------------------------
    async def heartbeat(self) -> None:
        lat = [s.mean_latency_ms for s in self.stats.values() if s.fetched]
        await self.scheduler.beat(Heartbeat(
            worker=self.run_id, depth=len(self.active) + self.writer.pending // 100,
            latency_ms=sum(lat) / len(lat) if lat else 100.0, in_flight=self.slots.in_flight()))

    async def _start_batches(self) -> int:
        """Claim a batch for every source with room (``fetch/claims.py``) and start them."""
        claimed = await self.claims.next(paused=self.writer.degraded)
        for source, batch, holder in claimed:
            self.claims.starting(source.id, +1)
            task = asyncio.create_task(self.run_batch(source, batch, holder))
            task.add_done_callback(self._batch_done)
            self.active[task] = source.id
        return len(claimed)

    def new_work(self, source_id: str) -> None:
        """Work of the source queued (by a list page's links, or outside this worker: the
        sitemaps its robots.txt names): claimed now, not once the batch it runs ends."""
        self.claims.new_work(source_id)
        self._wake.set()

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._finished.append(task)
        self._wake.set()

    async def run(self, *, until_idle: bool = True, seconds: float | None = None,
                  stop: asyncio.Event | None = None,
                  idle_check: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Fetch until stopped, out of time, or (``until_idle``) nothing is due anywhere."""
        deadline = time.monotonic() + seconds if seconds else None
        last_beat = 0.0
        slots_done = asyncio.Event()
        slot_keeper = asyncio.create_task(self.slots.keep(slots_done))
        try:
            while not (stop and stop.is_set()) and not (deadline and time.monotonic() > deadline):
                if self.outage.down:  # a tier away: no claims until it answers (or the limit)
                    await self.outage.recovered()
                    self._collect()
                    continue
                if time.monotonic() - last_beat > 2:
                    try:
                        await self.heartbeat()
                        last_beat = time.monotonic()
                    except TIER_DOWN as e:
                        self.outage.failed(e)
                        continue
                if self.writer.degraded and not await self.writer.probe():
                    # PostgreSQL away: no new claims, the spool holds what was fetched (or,
                    # with the spool's disk full too, the writer's memory, within a bound)
                    self.outage.away("PostgreSQL", "staging spools its pages"
                                     if self.writer.spool_error is None else
                                     "and the spool cannot be written either "
                                     f"({self.writer.spool_error}): fetched pages held in "
                                     "memory")
                    continue
                try:
                    started = await self._start_batches()
                except TIER_DOWN as e:
                    self.outage.failed(e)
                    continue
                except Exception as e:  # a tier hiccup: back off, keep the batches running
                    log.warning("fetch: cannot claim (%s); retrying", e)
                    started = 0
                    await asyncio.sleep(1.0)
                await self.slots.give_back_spares(older_than=time.monotonic() - SPARE_S)
                if self.record.live is not None and self.record.live.flush_due:
                    await self.record.send_live()
                if self.active:
                    if not self._finished:  # woken by the first batch to finish, or in 0.2 s
                        self._wake.clear()
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._wake.wait(), timeout=0.2)
                    self._collect()
                elif not started:
                    if released := await self.set_aside.hold.release(self.sources.sources):
                        for source_id in released:   # held variants: due now, claimed now
                            self.claims.new_work(source_id)
                        continue
                    if until_idle and (idle_check is None or await idle_check()):
                        break
                    await asyncio.sleep(0.2)
        finally:
            await self._drain()
            await self.slots.give_back_spares()
            await self.record.send_live()
            slots_done.set()
            await slot_keeper
            with contextlib.suppress(*TIER_DOWN):
                await self.scheduler.leave(self.run_id)
            await self.close()

    def _collect(self) -> None:
        """Forget the batches that finished (a batch that raised is logged)."""
        done, self._finished = self._finished, []
        for task in done:
            sid = self.active.pop(task)
            if not task.cancelled() and task.exception():
                log.error("fetch: batch of %s failed: %r", sid, task.exception())

    async def _drain(self) -> None:
        """Stop: running batches fetch no further task and get ``drain_s`` for the
        requests in flight; then they are cancelled. Either way a batch lands what it
        fetched and gives its other tasks back (no attempt spent) — nothing is left
        FETCHING for its lease to expire."""
        self.slots.stopping = True
        self._wake.set()
        if self.active:
            await asyncio.wait(self.active, timeout=self.drain_s)
        for task in self.active:
            task.cancel()
        await asyncio.gather(*self.active, return_exceptions=True)
        self.active.clear()
