"""A fetch worker: batches of one source, each fetched in lanes, concurrent across batches.

A request in flight holds one of its source's cluster-wide concurrency slots: a batch
starts with one slot and takes as many more as the source has free (up to one per task),
each a lane that fetches the batch's next task until none is left, then gives its slot
up at once — a batch waiting on its slowest request holds one slot, not all of them (the
process keeps it ``SPARE_S`` for the source's next claim or lane, then gives it back).
Every request waits its turn on the source's shared pace. Claims are sized so a batch lasts
about ``BATCH_S`` at the source's latency: on a site answering in 2 s a batch is a few
tasks per lane (what is due next is looked at again soon: a list page found meanwhile is
not queued behind a hundred items), on a fast one the source's whole ``batch_size``.
Results become ledger outcomes (the retry rules of ``fetch/classify.py``) and staging
rows, handed to the staging writer; a batch with more than half its tasks failed goes to
the level-2 delay queue (15 minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from stratacrawl.cold.staging import StagedFetch, make_row, to_discover
from stratacrawl.cold.tasks import Batch, ClaimedTask, Outcome, TaskState
from stratacrawl.cold.url_rules import REDUNDANT_PREFIX
from stratacrawl.errors import InvalidURL
from stratacrawl.fetch.fetcher import REDIRECT_OUT_OF_SCOPE, Fetcher, SourceClient
from stratacrawl.fetch.hop import ListHop
from stratacrawl.fetch.outage import Outage
from stratacrawl.fetch.outcomes import outcome_for
from stratacrawl.fetch.politeness import SLOT_RENEW_S, Politeness
from stratacrawl.fetch.result import FetchResult
from stratacrawl.fetch.sessions import Sessions
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.links import canonical_link
from stratacrawl.frontier.recrawl import RecrawlBudget, changed, next_day
from stratacrawl.frontier.scheduler import Scheduler
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.hot.live import LiveMetrics
from stratacrawl.hot.url_state import HotURL, HotURLState
from stratacrawl.hot.workers import Heartbeat
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.tier_errors import TIER_DOWN
from stratacrawl.urls import canonical_fingerprint, canonicalize, resolve
from stratacrawl.urls.equivalence import apply, rewrite

log = logging.getLogger(__name__)
LEVEL2_FAILURE_RATE = 0.5
DRAIN_S = 10.0   # a stopping worker's in-flight requests get this long (STRATACRAWL_DRAIN_S)
CLAIMS_AT_ONCE = 32
# Worker weights and source order are re-read this often (200 sources: one 200-command
# pipeline), not on every batch that finishes.
PLAN_EVERY_S = 0.5
BATCH_S = 2.0   # a claim is sized to last about this long at its source's latency
GROW_EVERY_S = 0.5   # how often a batch with tasks waiting looks for more free slots
SPARE_S = 0.25       # a slot no lane uses is kept this long for the source's next claim
LATENCY_WEIGHT = 0.2  # each answer's weight in its source's latency (moving average)


@dataclass
class SourceStats:
    fetched: int = 0
    ok: int = 0
    not_modified: int = 0
    failed: int = 0
    bytes: int = 0
    latency_ms: float = 0.0
    delayed_batches: int = 0
    redundant: int = 0   # claimed variants of a queued URL (a learned URL rule): not fetched
    over_budget: int = 0  # claimed re-fetches past the source's daily budget: due tomorrow
    reasons: Counter[str] = field(default_factory=Counter)  # final outcome of each fetch
    retries: Counter[str] = field(default_factory=Counter)  # level-1 retries, by the fault

    @property
    def mean_latency_ms(self) -> float:
        return self.latency_ms / self.fetched if self.fetched else 0.0


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
        self.ledger = frontier.ledger
        self.scheduler = scheduler
        self.url_rules = url_rules
        self.hot_urls = hot_urls
        self.sources = sources
        self.writer = writer
        self.worker_id = worker_id  # the name: staging rows, heartbeats, traces
        self.run_id = run_id or worker_id  # this process: leases and slots
        self.max_batches = max_batches
        self.on_result = on_result
        self.politeness = politeness   # the sources' pace and slots (the fetcher's too)
        self.fetcher = fetcher
        self.budget = budget
        self.drain_s = drain_s
        # Set when the worker stops (a signal, its time is up): batches fetch no further
        # task, land what they fetched and give the rest back.
        self.stopping = False
        self.outage = outage
        self.sessions = sessions
        self.stats: dict[str, SourceStats] = {s: SourceStats() for s in sources.ids}
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
        # slot holder → its source: one per request in flight (renewed by the keeper)
        self.slots: dict[str, str] = {}
        # by source: the slots in ``slots`` (changed only with it, by ``_hold`` and
        # ``_release_slot``) plus those being asked for (a script call in flight) — what
        # this process holds of a source or may hold in a moment
        self._mine: Counter[str] = Counter()
        # by source: slots a lane or claim had no more use for, still held (and renewed)
        # for ``SPARE_S`` — the next claim or lane of the source takes one instead of a
        # script call, and nobody gives it back to Redis in between; (holder, since)
        self._spare: dict[str, list[tuple[str, float]]] = {}
        self._spares = 0   # in ``_spare``, all sources
        self._latency_ms: dict[str, float] = {}  # per source, a moving average of answers
        self.live = live   # None: no live monitoring counters

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
            await self.politeness.acquire_slot(source.id, holder, source.concurrency)
        self._hold(holder, source.id)
        stats = self.stats.setdefault(source.id, SourceStats())
        results: list[tuple[ClaimedTask, FetchResult]] = []
        staged: list[StagedFetch] = []
        news: dict[int, bool] = {}
        try:
            try:
                batch.tasks = await self._drop_redundant(source, batch, stats)
                batch.tasks = await self._within_budget(source, batch, stats)
                if not batch.tasks:
                    return
                client = await self.client_for(source)
                await self._fetch_all(source, batch, client, holder, results, staged, news)
            except TIER_DOWN as e:  # our tier, not the site: what was fetched lands
                self.outage.failed(e)
                await self._hand_over(source, batch, results, staged, news, stats,
                                      "tier-unavailable")
            except asyncio.CancelledError:  # the drain time is up: the same, then stop
                await self._hand_over(source, batch, results, staged, news, stats, "stopped")
                raise
            else:
                await self._hand_over(source, batch, results, staged, news, stats, "stopped")
        finally:
            if self._took_all.get(source.id) == batch.batch_id:
                del self._took_all[source.id]   # the source may have due work again
            await self._release_slot(source.id, holder)

    async def _release_slot(self, source_id: str, holder: str) -> None:
        """A slot this process has no more use for: kept spare for ``SPARE_S`` (the next
        claim or lane of its source takes it) unless the worker is stopping."""
        if self.stopping or holder not in self.slots:
            await self._give_back(source_id, [holder])
        else:
            self._spare.setdefault(source_id, []).append((holder, time.monotonic()))
            self._spares += 1

    def _take_spare(self, source_id: str) -> str | None:
        """A spare slot of the source (the latest), or None."""
        spare = self._spare.get(source_id)
        if not spare:
            return None
        holder, _ = spare.pop()
        self._spares -= 1
        if not spare:
            del self._spare[source_id]
        return holder

    async def _give_back_spares(self, older_than: float | None = None) -> None:
        """Give back to Redis the spare slots kept since before ``older_than`` (all: None),
        one call per source."""
        due: dict[str, list[str]] = {}   # taken out first: claims take spares meanwhile
        for source_id, spare in list(self._spare.items()):
            old = [h for h, since in spare if older_than is None or since < older_than]
            if not old:
                continue
            due[source_id] = old
            self._spares -= len(old)
            kept = [(h, t) for h, t in spare if older_than is not None and t >= older_than]
            if kept:
                self._spare[source_id] = kept
            else:
                del self._spare[source_id]
        for source_id, holders in due.items():
            await self._give_back(source_id, holders)

    async def _give_back(self, source_id: str, holders: list[str]) -> None:
        """Slots given back: in Redis unless a tier is down (then they expire after
        ``SLOT_TTL_S``), then in ``slots`` — until Redis has them back, this process counts
        them as its own and asks for no slot Redis cannot give yet."""
        try:
            with contextlib.suppress(*TIER_DOWN):
                await self.politeness.release_slots(source_id, holders)
        finally:
            for holder in holders:
                if self.slots.pop(holder, None) is not None:
                    self._mine[source_id] -= 1

    def _hold(self, holder: str, source_id: str) -> None:
        """A slot Redis gave ``holder``, in ``slots``."""
        if holder not in self.slots:
            self.slots[holder] = source_id
            self._mine[source_id] += 1

    async def _hand_over(self, source: Source, batch: Batch,
                         results: list[tuple[ClaimedTask, FetchResult]],
                         staged: list[StagedFetch], news: dict[int, bool],
                         stats: SourceStats, reason: str) -> None:
        """The batch's fetched pages to the staging writer with their outcomes; its tasks
        not fetched (the worker stopping, a tier away) back to the queue, ``reason`` in
        their ``last_error``, their attempt refunded."""
        fetched = {t.id for t, _ in results}
        left = [t.id for t in batch.tasks if t.id not in fetched]
        if left:
            try:
                await self.ledger.give_back(left, self.run_id, reason)
                await self.frontier.finished(source.id, left, self.run_id)
            except TIER_DOWN as e:  # their leases expire and are reclaimed instead
                self.outage.failed(e)
        if results:
            await self._record(source, batch, results, staged, news, stats)

    async def _record(self, source: Source, batch: Batch,
                      results: list[tuple[ClaimedTask, FetchResult]],
                      staged: list[StagedFetch], news: dict[int, bool],
                      stats: SourceStats) -> None:
        """Outcomes of the fetched tasks, their pages to the staging writer, the stats."""
        for task, r in results:
            if not r.verdict.success:
                log.info("fetch failed: %s", r.verdict.reason, extra={
                    "source_id": source.id, "task_id": task.id, "batch_id": batch.batch_id,
                    "url_hash": task.url_hash, "trace_id": r.trace_id,
                    "worker": self.worker_id, "latency_ms": round(r.elapsed_ms, 1),
                    "status": r.status, "error": r.verdict.reason})
        failures = sum(1 for _, r in results if not r.verdict.success)
        level2 = len(results) > 1 and failures / len(results) > LEVEL2_FAILURE_RATE
        stats.delayed_batches += int(level2)
        now = datetime.now(UTC)
        for (task, result), item in zip(results, staged, strict=True):
            item.outcome = outcome_for(task, result, source, level2, now, item.content_hash,
                                       news.get(task.id))
            await self.writer.add(source.id, item)
            stats.fetched += 1
            stats.latency_ms += result.elapsed_ms
            stats.bytes += result.size
            stats.reasons[result.verdict.reason] += 1
            stats.retries.update(result.retried)
            if result.status == 304:
                stats.not_modified += 1
            elif result.verdict.success:
                stats.ok += 1
            else:
                stats.failed += 1
        try:
            await self.sessions.save(source.id)
        except TIER_DOWN as e:  # cookies are saved again after the next batch
            self.outage.failed(e)
        if self.live is not None:   # sent by the worker loop (``_send_live``)
            self.live.record_batch(source.id, self.worker_id,
                                   [(t.url_hash, r) for t, r in results])

    async def _fetch_all(self, source: Source, batch: Batch, client: SourceClient,
                         holder: str, results: list[tuple[ClaimedTask, FetchResult]],
                         staged: list[StagedFetch], news: dict[int, bool]) -> None:
        """Fetch the batch's tasks (conditionally, with the validators hot holds) in as many
        lanes as the source has free slots, until done or the worker stops; into
        ``results`` and ``staged`` each fetch and its staging row, into ``news`` whether
        each list page whose links the hop put in the frontier showed news (task id →
        bool). A lane with nothing left gives its slot back at once (``holder``, the
        batch's own, is released by the caller)."""
        validators = await self.hot_urls.get_many([t.url_hash for t in batch.tasks])
        lanes = _Lanes(self, source, batch, client, holder,
                       deque(zip(batch.tasks, validators, strict=True)), results, staged, news)
        await lanes.run()

    async def _extra_lanes(self, source: Source, batch: Batch, wanted: int) -> list[str]:
        """Holders of up to ``wanted`` more slots of the source (one script call): as many
        as it has free now, within the worker's allowance of requests in flight."""
        wanted = min(wanted, self._allowance - self._in_flight(), self._room(source))
        spares: list[str] = []
        while len(spares) < wanted and (spare := self._take_spare(source.id)) is not None:
            spares.append(spare)
        wanted -= len(spares)
        if wanted <= 0:
            return spares
        holders = [f"{self.run_id}:{batch.batch_id}:{uuid.uuid4().hex[:8]}"
                   for _ in range(wanted)]
        self._mine[source.id] += wanted
        try:
            taken = holders[:await self.politeness.renew_slots(source.id, holders,
                                                               source.concurrency)]
        finally:
            self._mine[source.id] -= wanted
        for h in taken:
            self._hold(h, source.id)
        return spares + taken

    def _in_flight(self) -> int:
        """Slots this process holds for requests (spare ones not counted)."""
        return len(self.slots) - self._spares

    def _room(self, source: Source) -> int:
        """Slots of ``source`` that may be free: its concurrency less what this process
        holds of it or is asking for. Where this process fills a source alone, none is
        free, and asking Redis would cost a script call for nothing (on slow sites,
        where batches of one source run side by side, one a fetch)."""
        return source.concurrency - self._mine[source.id] + len(self._spare.get(source.id, ()))

    async def _fetch_one(self, source: Source, client: SourceClient, task: ClaimedTask,
                         hot: HotURL | None, results: list[tuple[ClaimedTask, FetchResult]],
                         staged: list[StagedFetch], news: dict[int, bool]) -> None:
        """Fetch one task (a conditional request when ``hot`` has validators); its result
        and staging row into ``results`` and ``staged``."""
        v = {"etag": hot.etag, "last_modified": hot.last_modified} if hot else {}
        result = await self.fetcher.fetch(client, source, task.url,
                                          {k: x for k, x in v.items() if x},
                                          trace_id=task.trace_id)
        fetched = self.last_fetch_at = time.monotonic()
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
            page = await self.hop(source, task, result, fetched)
            if page is not None:
                news[task.id] = page.news
                if page.queued or page.requeued:  # new work: claim it now, not in 1 s
                    self._skip_until.pop(source.id, None)
                    self._took_all.pop(source.id, None)
                    self._queued[source.id] += 1
                    self._wake.set()
        item = self._staged(task, result, source, content_hash, same,
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

    async def _drop_redundant(self, source: Source, batch: Batch,
                              stats: SourceStats) -> list[ClaimedTask]:
        """The batch without the variants that a learned URL rule maps onto a URL the
        source already has a task for: those end ``REDUNDANT``, never fetched."""
        pinned, learned = await self.url_rules.of(source)
        if not pinned and not learned:
            return batch.tasks
        targets: dict[int, tuple[str, str]] = {}
        for t in batch.tasks:
            try:
                canonical = canonicalize(t.url)
            except InvalidURL:
                continue
            mapped = rewrite(canonical, pinned, learned)
            target = canonical_fingerprint(mapped)
            # Discovery queues a variant under its rewritten fingerprint when it is the first
            # URL of its page: the task is then its own target, and is fetched.
            if mapped != canonical and target != t.url_hash:
                rule = next((r.text() for r in (*pinned, *learned)
                             if apply([r], canonical) != canonical), "rules")
                targets[t.id] = (target, rule)
        if not targets:
            return batch.tasks
        queued = await self.ledger.queued(source.id, [fp for fp, _ in targets.values()])
        redundant = [Outcome(t.id, TaskState.REDUNDANT, None, REDUNDANT_PREFIX + targets[t.id][1])
                     for t in batch.tasks if t.id in targets and targets[t.id][0] in queued]
        stats.redundant += len(redundant)
        return await self._set_aside(source, batch, redundant)

    async def _within_budget(self, source: Source, batch: Batch,
                             stats: SourceStats) -> list[ClaimedTask]:
        """The batch without the re-fetches past the source's daily budget: those are given
        back, due at the next UTC day's start."""
        if source.recrawl.daily_budget is None:
            return batch.tasks
        again = [t for t in batch.tasks if t.recrawl_s is not None]
        granted = await self.budget.take(source, len(again))
        if granted == len(again):
            return batch.tasks
        tomorrow = next_day(datetime.now(UTC))
        waiting = [Outcome(t.id, TaskState.PENDING, None,
                           f"recrawl budget: {source.recrawl.daily_budget} a day", tomorrow)
                   for t in again[granted:]]
        stats.over_budget += len(waiting)
        return await self._set_aside(source, batch, waiting)

    async def _set_aside(self, source: Source, batch: Batch,
                         outcomes: list[Outcome]) -> list[ClaimedTask]:
        """Record these outcomes of claimed tasks that will not be fetched; the batch
        without them."""
        if not outcomes:
            return batch.tasks
        await self.frontier.complete(source.id, outcomes, self.run_id)
        gone = {o.task_id for o in outcomes}
        return [t for t in batch.tasks if t.id not in gone]

    async def keep_slots(self, stop: asyncio.Event) -> None:
        """Renew every slot this process holds every ``SLOT_RENEW_S`` until ``stop``: a
        slot lives ``SLOT_TTL_S`` unless renewed, so a killed process's slots free up
        within seconds (not after a long per-batch timeout). Never stops a crawl."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SLOT_RENEW_S)
            by_source: dict[str, list[str]] = {}
            for holder, source_id in list(self.slots.items()):
                by_source.setdefault(source_id, []).append(holder)
            try:
                await asyncio.gather(*(self.politeness.renew_slots(
                    sid, holders, self.sources.get(sid).concurrency)
                    for sid, holders in by_source.items()))
            except Exception as e:  # Redis away: slots come back when it does
                log.warning("fetch: slots not renewed: %r", e)

    def _staged(self, task: ClaimedTask, r: FetchResult, source: Source,
                content_hash: str | None, same_as_last: bool, discovered: bool) -> StagedFetch:
        """The staging row of one fetch (body zstd-compressed); its ledger outcome is set
        when the batch is over (a batch that mostly failed is delayed as a whole)."""
        success = r.verdict.success
        row = None
        if r.status is not None:
            row = make_row(fetched_at=r.fetched_at, fetch_key=f"{task.id}:{task.attempts}:"
                           f"{r.trace_id}", source_id=source.id, task_id=task.id,
                           attempt=task.attempts, url=task.url, final_url=r.final_url,
                           status=r.status, headers=r.headers, content_type=r.content_type,
                           body=r.body, elapsed_ms=r.elapsed_ms, trace_id=r.trace_id,
                           worker=self.worker_id, kind=task.kind, success=success,
                           same_as_last=same_as_last, discovered=discovered)
        canonical = None
        if success and r.body and "html" in (r.content_type or ""):
            href = canonical_link(r.body)
            with contextlib.suppress(InvalidURL):
                canonical = resolve(r.final_url or task.url, href) if href else None
        return StagedFetch(row=row, outcome=Outcome(task.id, TaskState.LEASED),
                           url_hash=task.url_hash,
                           content_hash=content_hash, etag=r.etag, last_modified=r.last_modified,
                           succeeded=success, fetched_at=r.fetched_at, status=r.status,
                           body_bytes=len(r.body), canonical_url=canonical,
                           attempt=task.attempts)

    # -- the loop -----------------------------------------------------------------------------
    async def heartbeat(self) -> None:
        lat = [s.mean_latency_ms for s in self.stats.values() if s.fetched]
        await self.scheduler.beat(Heartbeat(
            worker=self.run_id, depth=len(self.active) + self.writer.pending // 100,
            latency_ms=sum(lat) / len(lat) if lat else 100.0, in_flight=self._in_flight()))

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
            if self._in_flight() + len(wanted) >= allowance or self.writer.degraded:
                break
            source = self.sources.get(source_id)
            if self._room(source) <= 0 or self._skip_until.get(source_id, 0) > now \
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
        if self._room(source) <= 0:
            return None
        queued = self._queued[source.id]
        holder = self._take_spare(source.id)
        if holder is None:
            holder = f"{self.run_id}:{uuid.uuid4().hex[:16]}"
            self._mine[source.id] += 1
            try:
                if not await self.politeness.acquire_slot(source.id, holder,
                                                          source.concurrency):
                    return None
            finally:
                self._mine[source.id] -= 1
            self._hold(holder, source.id)
        try:
            batch = await self.frontier.claim(source.id, self._claim_size(source), self.run_id)
        except BaseException:   # (a tier away: its slot is no use to the next claim)
            await self._give_back(source.id, [holder])
            raise
        if not batch.tasks:
            await self._release_slot(source.id, holder)
            if self._queued[source.id] == queued:
                self._skip_until[source.id] = now + 1.0
            return None
        if batch.took_all_due and self._queued[source.id] == queued:
            self._took_all[source.id] = batch.batch_id
        return source, batch, holder

    def _claim_size(self, source: Source) -> int:
        """Tasks to claim for ``source``: what its lanes fetch in about ``BATCH_S`` at
        its latency so far (its ``batch_size`` at most; one per lane before the first
        answer)."""
        latency_ms = self._latency_ms.get(source.id)
        if latency_ms is None:
            return min(source.batch_size, source.concurrency)
        per_lane = max(1, round(BATCH_S * 1000 / max(latency_ms, 1.0)))
        return min(source.batch_size, per_lane * source.concurrency)

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
        slot_keeper = asyncio.create_task(self.keep_slots(slots_done))
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
                await self._give_back_spares(older_than=time.monotonic() - SPARE_S)
                if self.live is not None and self.live.flush_due:
                    await self._send_live()
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
            await self._give_back_spares()
            await self._send_live()
            slots_done.set()
            await slot_keeper
            with contextlib.suppress(*TIER_DOWN):
                await self.scheduler.leave(self.run_id)
            await self.close()

    async def _send_live(self) -> None:
        """The live counters buffered since the last send, in one pipeline."""
        if self.live is None:
            return
        try:  # monitoring must never stop a fetch
            await self.live.flush()
        except Exception as e:
            log.warning("fetch: live metrics not recorded: %s", e)

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
        self.stopping = True
        self._wake.set()
        if self.active:
            await asyncio.wait(self.active, timeout=self.drain_s)
        for task in self.active:
            task.cancel()
        await asyncio.gather(*self.active, return_exceptions=True)
        self.active.clear()


class _Lanes:
    """One batch's lanes: each holds a slot of the source and fetches the batch's next
    task until none is left. (A class, not closures: closures that start each other form
    a reference cycle, and a cycle holding a batch's staged pages waits for the cyclic
    collector — a crawl's memory grew by its pages' bodies.)"""

    def __init__(self, worker: FetchWorker, source: Source, batch: Batch,
                 client: SourceClient, holder: str,
                 todo: deque[tuple[ClaimedTask, HotURL | None]],
                 results: list[tuple[ClaimedTask, FetchResult]],
                 staged: list[StagedFetch], news: dict[int, bool]) -> None:
        self.worker, self.source, self.batch, self.client = worker, source, batch, client
        self.holder = holder   # the batch's own slot: released by run_batch
        self.todo, self.results, self.staged, self.news = todo, results, staged, news
        self.running: set[asyncio.Task[None]] = set()
        self.failed: list[Exception] = []
        self.grow_at = 0.0

    async def run(self) -> None:
        self.running.add(asyncio.create_task(self.lane(self.holder)))
        try:
            await self.grow()
            while self.running:
                done, _ = await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
                self.running.difference_update(done)
        finally:  # cancelled (the drain time is up): the lanes with it
            for lane in self.running:
                lane.cancel()
            await asyncio.gather(*self.running, return_exceptions=True)
            self.running.clear()
        if self.failed:
            raise self.failed[0]

    async def grow(self) -> None:
        """More lanes while tasks wait and the source has free slots (looked at on start
        and then at most every ``GROW_EVERY_S``: a full source costs little)."""
        wanted = min(len(self.todo), self.source.concurrency) - len(self.running)
        if wanted <= 0 or time.monotonic() < self.grow_at:
            return
        self.grow_at = time.monotonic() + GROW_EVERY_S
        for extra in await self.worker._extra_lanes(self.source, self.batch, wanted):
            self.running.add(asyncio.create_task(self.lane(extra)))

    async def lane(self, holder: str) -> None:
        w = self.worker
        try:
            while self.todo and not w.stopping and not self.failed:
                task, hot = self.todo.popleft()
                await w._fetch_one(self.source, self.client, task, hot, self.results,
                                   self.staged, self.news)
                await self.grow()
        except Exception as e:  # the other lanes stop taking tasks; raised by run()
            self.failed.append(e)
        finally:
            if holder != self.holder:   # (the batch's own slot: run_batch gives it back)
                await w._release_slot(self.source.id, holder)
                w._wake.set()   # a slot of this source is free: claim more
