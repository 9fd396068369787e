"""What of a claimed batch is fetched, and how much to claim.

Two kinds of claimed task are set aside before any request: a variant that a URL rule
maps onto a URL the source already has a task for (it ends ``REDUNDANT``, never fetched),
and a re-fetch past the source's daily re-crawl budget (given back, due at the next UTC
day's start). A claim is sized to last about ``BATCH_S`` at the source's latency: on a
site answering in 2 s a batch is a few tasks per lane (what is due next is looked at again
soon: a list page found meanwhile is not queued behind a hundred items), on a fast one the
source's whole ``batch_size``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from stratacrawl.cold.tasks import Batch, ClaimedTask, Outcome, TaskState
from stratacrawl.cold.url_rules import REDUNDANT_PREFIX
from stratacrawl.errors import InvalidURL
from stratacrawl.fetch.recording import SourceStats
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.recrawl import RecrawlBudget, next_day
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.sources import Source
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.urls.equivalence import apply, rewrite

BATCH_S = 2.0   # a claim is sized to last about this long at its source's latency


def claim_size(source: Source, latency_ms: float | None) -> int:
    """Tasks to claim for ``source``: what its lanes fetch in about ``BATCH_S`` at its
    latency so far (its ``batch_size`` at most; one per lane before the first answer)."""
    if latency_ms is None:
        return min(source.batch_size, source.concurrency)
    per_lane = max(1, round(BATCH_S * 1000 / max(latency_ms, 1.0)))
    return min(source.batch_size, per_lane * source.concurrency)


class SetAside:
    """Sets aside the claimed tasks not to fetch (process ``run_id``'s claims), recording
    their outcomes in ``frontier``: redundant variants (``url_rules``), re-fetches past the
    daily ``budget``."""

    def __init__(self, *, frontier: Frontier, url_rules: UrlRules, budget: RecrawlBudget,
                 run_id: str) -> None:
        self.frontier = frontier
        self.url_rules = url_rules
        self.budget = budget
        self.run_id = run_id

    async def __call__(self, source: Source, batch: Batch,
                       stats: SourceStats) -> list[ClaimedTask]:
        """The batch's tasks to fetch."""
        batch.tasks = await self._redundant(source, batch, stats)
        return await self._over_budget(source, batch, stats)

    async def _redundant(self, source: Source, batch: Batch,
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
