"""Claims: which sources to claim for, how much, and what of a claimed batch is fetched.

The worker claims a batch for every source with room, best first (the scheduler's order
and the worker's allowance of requests in flight, re-read every ``PLAN_EVERY_S``), side
by side ``CLAIMS_AT_ONCE`` at a time: with slow sources thousands of batches are in flight
and a claim is a few round trips. A claim that found nothing skips its source for a
second; one that took every task of the source that was due, for as long as its batch
runs — either unless the source's list pages queue new work meanwhile (then it is claimed
at once). Without that, on a chain of list pages (each the only task of its source due,
claimed when the page before it names it) every batch that ends would be followed by a
claim finding nothing: a slot, a pop, a ledger read, a release.

Three kinds of claimed task are set aside before any request: a variant that a URL rule
maps onto a URL the source already has a task for (it ends ``REDUNDANT``, never fetched),
a variant whose rule is still undecided (held back a while: ``fetch/variants.py``), and a
re-fetch past the source's daily re-crawl budget (given back, due at the next UTC day's
start). A claim is sized to last about ``BATCH_S`` at the source's latency: on a
site answering in 2 s a batch is a few tasks per lane (what is due next is looked at again
soon: a list page found meanwhile is not queued behind a hundred items), on a fast one the
source's whole ``batch_size``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from stratacrawl.cold.tasks import Batch, ClaimedTask, Outcome, TaskState
from stratacrawl.cold.url_rules import REDUNDANT_PREFIX
from stratacrawl.fetch.outage import Outage
from stratacrawl.fetch.recording import SourceStats
from stratacrawl.fetch.slots import Slots
from stratacrawl.fetch.variants import VariantHold, canonical_urls
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.recrawl import RecrawlBudget, next_day
from stratacrawl.frontier.scheduler import Scheduler
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.tier_errors import TIER_DOWN
from stratacrawl.urls import canonical_fingerprint
from stratacrawl.urls.equivalence import Rule, apply, rewrite

log = logging.getLogger(__name__)
BATCH_S = 2.0   # a claim is sized to last about this long at its source's latency
CLAIMS_AT_ONCE = 32
# Worker weights and source order are re-read this often (200 sources: one 200-command
# pipeline), not on every batch that finishes.
PLAN_EVERY_S = 0.5
LATENCY_WEIGHT = 0.2  # each answer's weight in its source's latency (moving average)

Claimed = tuple[Source, Batch, str]   # a batch and the slot it runs under


def claim_size(source: Source, latency_ms: float | None) -> int:
    """Tasks to claim for ``source``: what its lanes fetch in about ``BATCH_S`` at its
    latency so far (its ``batch_size`` at most; one per lane before the first answer)."""
    if latency_ms is None:
        return min(source.batch_size, source.concurrency)
    per_lane = max(1, round(BATCH_S * 1000 / max(latency_ms, 1.0)))
    return min(source.batch_size, per_lane * source.concurrency)


class Claims:
    """The claims of process ``run_id`` for ``sources``: from ``frontier``, in the order
    and number ``scheduler`` gives (at most ``max_batches`` requests in flight), each under
    a slot of ``slots``; a tier that fails a claim is told to ``outage``."""

    def __init__(self, *, frontier: Frontier, scheduler: Scheduler, slots: Slots,
                 outage: Outage, sources: SourcesFile, run_id: str, max_batches: int) -> None:
        self.frontier = frontier
        self.scheduler = scheduler
        self.slots = slots
        self.outage = outage
        self.sources = sources
        self.run_id = run_id
        self.max_batches = max_batches
        self.allowance = max_batches   # requests in flight the scheduler allows now
        self._order: list[str] = []
        self._plan_until = 0.0
        self._skip_until: dict[str, float] = {}
        # by source: how often its list pages queued new work here (a claim that found
        # nothing new skips the source only if nothing was queued while it was under way)
        self._queued: Counter[str] = Counter()
        # by source: the running batch that took every task of it that was due
        self._took_all: dict[str, str] = {}
        # by source: batches claimed whose lanes have not started yet (``starting``)
        self._starting: Counter[str] = Counter()
        self._latency_ms: dict[str, float] = {}  # per source, a moving average of answers

    def answered(self, source_id: str, elapsed_ms: float) -> None:
        """A request of the source was answered in ``elapsed_ms`` (claims are sized by it)."""
        last = self._latency_ms.get(source_id, elapsed_ms)
        self._latency_ms[source_id] = last + LATENCY_WEIGHT * (elapsed_ms - last)

    def new_work(self, source_id: str) -> None:
        """The source's list pages queued work: claim it now, not in a second."""
        self._skip_until.pop(source_id, None)
        self._took_all.pop(source_id, None)
        self._queued[source_id] += 1

    def hold_off(self, source_id: str, seconds: float) -> None:
        """No claim of the source for ``seconds`` (a Retry-After holds it)."""
        self._skip_until[source_id] = time.monotonic() + seconds

    def starting(self, source_id: str, delta: int) -> None:
        """A batch of the source claimed (+1) or its lanes started, or it ended before
        (-1). No claim of the source meanwhile: the slots its lanes give up go to that
        batch's lanes, and a claim in between took a batch more for each of them."""
        self._starting[source_id] += delta
        if self._starting[source_id] <= 0:
            del self._starting[source_id]

    def batch_over(self, source_id: str, batch_id: str) -> None:
        """A batch ended: if it took all the source's due work, the source may have more."""
        if self._took_all.get(source_id) == batch_id:
            del self._took_all[source_id]

    async def next(self, paused: bool) -> list[Claimed]:
        """A batch for every source with room, best first, while the requests in flight
        stay below the allowance (none while ``paused``: staging is away)."""
        now = time.monotonic()
        if now >= self._plan_until:  # weights and source order: not on every wake-up
            self.allowance = min(self.max_batches, await self.scheduler.allowance(self.run_id))
            self._order = await self.scheduler.order(self.sources.ids)
            self._plan_until = now + PLAN_EVERY_S
        wanted: list[Source] = []
        for source_id in self._order:
            if self.slots.in_flight() + len(wanted) >= self.allowance or paused:
                break
            source = self.sources.get(source_id)
            if self.slots.room(source) <= 0 or self._skip_until.get(source_id, 0) > now \
                    or source_id in self._took_all or source_id in self._starting:
                continue
            wanted.append(source)
        gate = asyncio.Semaphore(CLAIMS_AT_ONCE)

        async def claim(source: Source) -> Claimed | None:
            async with gate:
                return await self._claim(source, now)

        out: list[Claimed] = []
        results = await asyncio.gather(*(claim(s) for s in wanted), return_exceptions=True)
        for source, claimed in zip(wanted, results, strict=True):
            if isinstance(claimed, TIER_DOWN):  # our tier went away: claims pause
                self.outage.failed(claimed)
            elif isinstance(claimed, BaseException):  # a hiccup: this source waits a bit
                log.warning("fetch: cannot claim for %s (%r); retrying", source.id, claimed)
                self._skip_until[source.id] = now + 1.0
            elif claimed is not None:
                out.append(claimed)
        return out

    async def _claim(self, source: Source, now: float) -> Claimed | None:
        """A batch of ``source`` and the slot it runs under, or None (source full or idle).
        The slot is taken before the claim (a full source costs one round trip; a spare
        one, none) and kept spare again when there was nothing to claim."""
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


class SetAside:
    """Sets aside the claimed tasks not to fetch (process ``run_id``'s claims), recording
    their outcomes in ``frontier``: redundant variants (``url_rules``), variants of an
    undecided rule (held back: ``VariantHold``), re-fetches past the daily ``budget``."""

    def __init__(self, *, frontier: Frontier, url_rules: UrlRules, budget: RecrawlBudget,
                 run_id: str) -> None:
        self.frontier = frontier
        self.url_rules = url_rules
        self.budget = budget
        self.run_id = run_id
        self.hold = VariantHold(frontier=frontier, url_rules=url_rules, run_id=run_id)

    async def __call__(self, source: Source, batch: Batch,
                       stats: SourceStats) -> list[ClaimedTask]:
        """The batch's tasks to fetch."""
        pinned, learned = await self.url_rules.of(source)
        canonical = canonical_urls(batch.tasks)
        batch.tasks = await self._redundant(source, batch, stats, pinned, learned, canonical)
        fetch = await self.hold(source, batch.tasks, pinned, learned, canonical)
        stats.held += len(batch.tasks) - len(fetch)
        batch.tasks = fetch
        return await self._over_budget(source, batch, stats)

    async def _redundant(self, source: Source, batch: Batch, stats: SourceStats,
                         pinned: Sequence[Rule], learned: Sequence[Rule],
                         canonical_of: Mapping[int, str]) -> list[ClaimedTask]:
        """The batch without the variants that a learned URL rule maps onto a URL the
        source already has a task for: those end ``REDUNDANT``, never fetched."""
        if not pinned and not learned:
            return batch.tasks
        targets: dict[int, tuple[str, str]] = {}
        for t in batch.tasks:
            canonical = canonical_of.get(t.id)
            if canonical is None:
                continue
            mapped = rewrite(canonical, pinned, learned)
            target = canonical_fingerprint(mapped)
            # Discovery queues a variant under its rewritten fingerprint when it is the
            # first URL of its page: the task is then its own target, and is fetched.
            if mapped != canonical and target != t.url_hash:
                rule = next((r.text() for r in (*pinned, *learned)
                             if apply([r], canonical) != canonical), "rules")
                targets[t.id] = (target, rule)
        if not targets:
            return batch.tasks
        queued = await self.frontier.ledger.queued(source.id,
                                                   [fp for fp, _ in targets.values()])
        redundant = [Outcome(t.id, TaskState.REDUNDANT, None, REDUNDANT_PREFIX + targets[t.id][1])
                     for t in batch.tasks if t.id in targets and targets[t.id][0] in queued]
        stats.redundant += len(redundant)
        return await self._complete(source, batch, redundant)

    async def _over_budget(self, source: Source, batch: Batch,
                           stats: SourceStats) -> list[ClaimedTask]:
        """The batch without the re-fetches past the source's daily budget: those are
        given back, due at the next UTC day's start."""
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
        return await self._complete(source, batch, waiting)

    async def _complete(self, source: Source, batch: Batch,
                        outcomes: list[Outcome]) -> list[ClaimedTask]:
        """Record these outcomes of claimed tasks that will not be fetched; the batch
        without them."""
        if not outcomes:
            return batch.tasks
        await self.frontier.complete(source.id, outcomes, self.run_id)
        gone = {o.task_id for o in outcomes}
        return [t for t in batch.tasks if t.id not in gone]
