"""A fetch worker: batches of one source, each fetched in lanes, concurrent across batches.

The worker loop claims a batch for every source with room, in the order and number the
scheduler gives, and runs each: the tasks it should not fetch set aside
(``fetch/claims.py``), the rest fetched in lanes (``fetch/lanes.py``) under the source's
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
from collections import Counter, deque
from collections.abc import Awaitable, Callable

from stratacrawl.cold.staging import to_discover
from stratacrawl.cold.tasks import Batch, ClaimedTask
from stratacrawl.fetch.claims import SetAside, claim_size
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
CLAIMS_AT_ONCE = 32
# Worker weights and source order are re-read this often (200 sources: one 200-command
# pipeline), not on every batch that finishes.
PLAN_EVERY_S = 0.5
LATENCY_WEIGHT = 0.2  # each answer's weight in its source's latency (moving average)


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
        self._skip_until: dict[str, float] = {}
        # by source: how often its list pages queued new work here (a claim that found
        # nothing new skips the source only if nothing was queued while it was under way)
        self._queued: Counter[str] = Counter()
        # by source: the running batch that took every task of it that was due (no claim
        # of the source while it runs, unless its list pages queue new work)
        self._took_all: dict[str, str] = {}
        self.active: dict[asyncio.Task[None], str] = {}  # running batch → its source
        self._plan_until = 0.0
        self._allowance = self.max_batches
        self._order: list[str] = []
        self._finished: list[asyncio.Task[None]] = []  # done, not yet collected by run()
        self._wake = asyncio.Event()
        self._latency_ms: dict[str, float] = {}  # per source, a moving average of answers

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
        """Fetch a claimed batch under the source's slot ``holder`` (taken here if None)."""
        if holder is None:
            holder = f"{self.run_id}:{batch.batch_id}"
            await self.slots.acquire(source, holder)
        self.slots.hold(holder, source.id)
        fetched: Fetched = ([], [], {})
        try:
            try:
                batch.tasks = await self.set_aside(source, batch, self.record.of(source.id))
                if not batch.tasks:
                    return
                client = await self.client_for(source)
                validators = await self.hot_urls.get_many([t.url_hash for t in batch.tasks])
                await Lanes(self, source, batch, client, holder,
                            deque(zip(batch.tasks, validators, strict=True)), fetched).run()
            except TIER_DOWN as e:  # our tier, not the site: what was fetched lands
                self.outage.failed(e)
                await self.record.hand_over(source, batch, fetched, "tier-unavailable")
            except asyncio.CancelledError:  # the drain time is up: the same, then stop
                await self.record.hand_over(source, batch, fetched, "stopped")
                raise
            else:
                await self.record.hand_over(source, batch, fetched, "stopped")
        finally:
            if self._took_all.get(source.id) == batch.batch_id:
                del self._took_all[source.id]   # the source may have due work again
            await self.slots.release(source.id, holder)

    # -- what the lanes ask (fetch/lanes.py) --------------------------------------------------
    async def more_slots(self, source: Source, batch: Batch, wanted: int) -> list[str]:
        """Up to ``wanted`` more slots for a batch's lanes: as many as the source has free
        now, within the worker's allowance of requests in flight."""
        return await self.slots.more(source, batch.batch_id,
                                     min(wanted, self._allowance - self.slots.in_flight()))

    async def slot_done(self, source_id: str, holder: str) -> None:
        """A lane's slot given up: a slot of this source is free, so claim more."""
        await self.slots.release(source_id, holder)
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
        last = self._latency_ms.get(source.id, result.elapsed_ms)
        self._latency_ms[source.id] = last + LATENCY_WEIGHT * (result.elapsed_ms - last)
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
                    self._skip_until.pop(source.id, None)
                    self._took_all.pop(source.id, None)
                    self._queued[source.id] += 1
                    self._wake.set()
        item = self.record.staged(task, result, source, content_hash, same,
                            discovered=page is not None)  # compressed from here
        results.append((task, result))  # together: a cancelled batch lands what it holds
        staged.append(item)
        if content_hash and result.status == 200 and source.url_rules.learn:
            self.url_rules.observe(source.id, task.url, content_hash, item.canonical_url,
                                   self.run_id)
        result.release_body()
        if result.verdict.reason == "source-held":  # Retry-After: skip it till then
            self._skip_until[source.id] = time.monotonic() + (
                result.verdict.retry_after_s or 0.0)

    # -- the loop -----------------------------------------------------------------------------
    async def heartbeat(self) -> None:
        lat = [s.mean_latency_ms for s in self.stats.values() if s.fetched]
        await self.scheduler.beat(Heartbeat(
            worker=self.run_id, depth=len(self.active) + self.writer.pending // 100,
            latency_ms=sum(lat) / len(lat) if lat else 100.0, in_flight=self.slots.in_flight()))

    async def _start_batches(self) -> int:
        """Claim a batch for every source with room (best first, while the worker's requests
        in flight — the slots it holds — are below its allowance) and start them. Claims
        run side by side, ``CLAIMS_AT_ONCE`` at a time: with slow sources thousands of
        batches are in flight and a claim is a few round trips, so claiming one source
        after the other would be what limits throughput."""
        now = time.monotonic()
        if now >= self._plan_until:  # weights and source order: not on every wake-up
            self._allowance = min(self.max_batches,
                                  await self.scheduler.allowance(self.run_id))
            self._order = await self.scheduler.order(self.sources.ids)
            self._plan_until = now + PLAN_EVERY_S
        allowance = self._allowance
        wanted: list[Source] = []
        for source_id in self._order:
            if self.slots.in_flight() + len(wanted) >= allowance or self.writer.degraded:
                break
            source = self.sources.get(source_id)
            if self.slots.room(source) <= 0 or self._skip_until.get(source_id, 0) > now \
                    or source_id in self._took_all:
                continue
            wanted.append(source)
        gate = asyncio.Semaphore(CLAIMS_AT_ONCE)

        async def claim(source: Source) -> tuple[Source, Batch, str] | None:
            async with gate:
                return await self._claim(source, now)

        started = 0
        results = await asyncio.gather(*(claim(s) for s in wanted), return_exceptions=True)
        for source, claimed in zip(wanted, results, strict=True):
            if isinstance(claimed, TIER_DOWN):  # our tier went away: claims pause
                self.outage.failed(claimed)
                continue
            if isinstance(claimed, BaseException):  # a hiccup: this source waits a bit
                log.warning("fetch: cannot claim for %s (%r); retrying", source.id, claimed)
                self._skip_until[source.id] = now + 1.0
                continue
            if claimed is None:
                continue
            _, batch, holder = claimed
            task = asyncio.create_task(self.run_batch(source, batch, holder))
            task.add_done_callback(self._batch_done)
            self.active[task] = source.id
            started += 1
        return started

    async def _claim(self, source: Source, now: float) -> tuple[Source, Batch, str] | None:
        """A batch of ``source`` and the slot it runs under, or None (source full or idle).
        The slot is taken before the claim (a full source costs one round trip; a spare
        one, none) and kept spare again when there was nothing to claim.

        A claim that found nothing skips the source for a second; one that took every
        task of the source that was due, for as long as its batch runs — either unless
        the source's list pages queue new work meanwhile (then it is claimed at once).
        Without that, on a chain of list pages (each the only task of its source due,
        claimed when the page before it names it) every batch that ends would be
        followed by a claim finding nothing: a slot, a pop, a ledger read, a release."""
        if self.slots.room(source) <= 0:
            return None
        queued = self._queued[source.id]
        holder = await self.slots.for_claim(source)
        if holder is None:
            return None
        try:
            batch = await self.frontier.claim(
                source.id, claim_size(source, self._latency_ms.get(source.id)), self.run_id)
        except BaseException:   # (a tier away: its slot is no use to the next claim)
            await self.slots.give_back(source.id, [holder])
            raise
        if not batch.tasks:
            await self.slots.release(source.id, holder)
            if self._queued[source.id] == queued:
                self._skip_until[source.id] = now + 1.0
            return None
        if batch.took_all_due and self._queued[source.id] == queued:
            self._took_all[source.id] = batch.batch_id
        return source, batch, holder

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
