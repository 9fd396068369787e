"""What a batch's fetches become: staging rows handed to the staging writer with their
ledger outcomes (the retry rules of ``fetch/classify.py``; a batch with more than half
its tasks failed goes to the level-2 delay queue, 15 minutes), per-source figures, the
sites' cookies saved, live counters; and the tasks a batch did not fetch, given back."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

from stratacrawl.cold.staging import StagedFetch, make_row
from stratacrawl.cold.tasks import Batch, ClaimedTask, Outcome, TaskState
from stratacrawl.errors import InvalidURL
from stratacrawl.fetch.outage import Outage
from stratacrawl.fetch.outcomes import outcome_for
from stratacrawl.fetch.result import FetchResult
from stratacrawl.fetch.sessions import Sessions
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.links import canonical_link
from stratacrawl.hot.live import LiveMetrics
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.tier_errors import TIER_DOWN
from stratacrawl.urls import resolve

log = logging.getLogger(__name__)
LEVEL2_FAILURE_RATE = 0.5


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
    held: int = 0        # claimed variants held back until their URL rule is decided
    over_budget: int = 0  # claimed re-fetches past the source's daily budget: due tomorrow
    reasons: Counter[str] = field(default_factory=Counter)  # final outcome of each fetch
    retries: Counter[str] = field(default_factory=Counter)  # level-1 retries, by the fault

    @property
    def mean_latency_ms(self) -> float:
        return self.latency_ms / self.fetched if self.fetched else 0.0


# One batch's fetches so far: (task, result) pairs, their staging rows (in the same order),
# and whether each list page whose links went into the frontier showed news (task id →).
Fetched = tuple[list[tuple[ClaimedTask, FetchResult]], list[StagedFetch], dict[int, bool]]


class Recorder:
    """Records the fetches of worker ``worker_id`` (process ``run_id``): pages to
    ``writer``, tasks not fetched back to ``frontier``, cookies to ``sessions``, counters
    to ``live`` (None: off), tier failures to ``outage``; ``stats`` per source."""

    def __init__(self, *, frontier: Frontier, writer: StagingWriter, sessions: Sessions,
                 outage: Outage, live: LiveMetrics | None, sources: SourcesFile,
                 worker_id: str, run_id: str) -> None:
        self.frontier = frontier
        self.writer = writer
        self.sessions = sessions
        self.outage = outage
        self.live = live
        self.worker_id = worker_id
        self.run_id = run_id
        self.stats: dict[str, SourceStats] = {s: SourceStats() for s in sources.ids}

    def of(self, source_id: str) -> SourceStats:
        return self.stats.setdefault(source_id, SourceStats())

    def staged(self, task: ClaimedTask, r: FetchResult, source: Source,
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

    async def hand_over(self, source: Source, batch: Batch, fetched: Fetched,
                        reason: str) -> None:
        """The batch's fetched pages to the staging writer with their outcomes; its tasks
        not fetched (the worker stopping, a tier away) back to the queue, ``reason`` in
        their ``last_error``, their attempt refunded."""
        results = fetched[0]
        done = {t.id for t, _ in results}
        left = [t.id for t in batch.tasks if t.id not in done]
        if left:
            try:
                await self.frontier.ledger.give_back(left, self.run_id, reason)
                await self.frontier.finished(source.id, left, self.run_id)
            except TIER_DOWN as e:  # their leases expire and are reclaimed instead
                self.outage.failed(e)
        if results:
            await self._record(source, batch, fetched)

    async def _record(self, source: Source, batch: Batch, fetched: Fetched) -> None:
        """Outcomes of the fetched tasks, their pages to the staging writer, the stats."""
        results, staged, news = fetched
        stats = self.of(source.id)
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
        if self.live is not None:   # sent by the worker loop (``send_live``)
            self.live.record_batch(source.id, self.worker_id,
                                   [(t.url_hash, r) for t, r in results])

    async def send_live(self) -> None:
        """The live counters buffered since the last send, in one pipeline."""
        if self.live is None:
            return
        try:  # monitoring must never stop a fetch
            await self.live.flush()
        except Exception as e:
            log.warning("fetch: live metrics not recorded: %s", e)
