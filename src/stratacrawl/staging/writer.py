"""The staging writer: buffered, in the background, acknowledging only what is durable.

Fetched pages are buffered and landed every ``flush_rows`` rows or ``flush_s`` seconds
(``LIST_FLUSH_S`` when a page discovery waits for is buffered; a backlog in larger flushes),
in background tasks so COPY overlaps fetching; up to ``parallel`` flushes run at once on
their own connections (a flush is mostly PostgreSQL's work: index upkeep of the ledger
and URL-state updates, so two flushes use two server cores). One transaction per flush
holds the COPY, the ledger outcomes and the URL state; leases are released in the hot
tier (and no longer renewed) only after it commits. If PostgreSQL is unreachable the batch
goes to the spool instead (durable on local disk), ``degraded`` turns on, and ``add``
blocks once ``max_pending`` rows wait — fetching slows and stops rather than piling up memory.

If the spool cannot be written either (a full disk, a quota, a read-only file system) while
PostgreSQL is away, the batch is held in memory (within ``max_pending``) and landed again
at the next flush, to whichever of the two comes back first: a second tier outage, which
the worker rides out like the first (claims paused, ``spool_error`` says why), never a
crash. Rows still held when the writer closes were never acknowledged: their tasks go
back to the queue with their leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.pool import ping
from stratacrawl.cold.staging import COLUMNS, StagedFetch, ensure_partitions, land
from stratacrawl.cold.tasks import LISTS
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.hot.url_state import HotURLState
from stratacrawl.staging.spool import Spool
from stratacrawl.tier_errors import POSTGRES_AWAY, POSTGRES_BUSY

log = logging.getLogger(__name__)
COMMIT_ATTEMPTS = 3
# A flush's transaction costs a commit (a WAL flush the connection waits for) and a fixed
# round of statements whatever its size: at 1,000 rows that is about a fifth of its time.
# When rows pile up behind busy flush slots — PostgreSQL is the bottleneck — a flush takes
# up to this many times ``flush_rows`` (group commit); with no backlog it lands every
# ``flush_rows`` rows or ``flush_s`` seconds as configured.
BACKLOG_FACTOR = 4
# Seed, list and sitemap pages are where discovery finds the next links (a paginated
# archive is a chain of them): a buffer holding one whose links are not in the frontier
# yet lands within this, not ``flush_s`` — the discovery loop reads it from staging. (A
# page the list hop discovered in-process, as every list page is while both tiers
# answer, waits for ``flush_s`` like any page: on slow sites, where list pages arrive
# every second or so, it would otherwise set the pace of every flush.)
LIST_FLUSH_S = 0.5
# The spool's disk is out of room or read-only: an outage of local storage, not a bug.
LOCAL_STORAGE_AWAY = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}
_KIND = COLUMNS.index("kind")
_DISCOVERED_AT = COLUMNS.index("discovered_at")


def _awaits_discovery(item: StagedFetch) -> bool:
    return (item.row is not None and item.row[_KIND] in LISTS
            and item.row[_DISCOVERED_AT] is None)


@dataclass
class WriterStats:
    landed: int = 0           # rows in staging
    awaiting_discovery: int = 0   # list pages the hop did not discover, in flushes that landed
    lost_leases: int = 0      # fetched pages dropped: their lease had been reclaimed
    spooled: int = 0
    held: int = 0             # rows neither tier could take, held in memory for a while
    unstaged_at_close: int = 0   # rows still held when the writer closed (tasks go again)
    flushes: int = 0
    flush_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


class StagingWriter:
    def __init__(self, *, pool: AsyncConnectionPool, frontier: Frontier,
                 hot_urls: HotURLState, spool: Spool, owner: str, flush_rows: int = 1000,
                 flush_s: float = 5.0, max_pending: int = 5000, parallel: int = 2) -> None:
        self.pool = pool
        self.frontier = frontier
        self.hot_urls = hot_urls
        self.spool = spool
        self.owner = owner
        self.flush_rows = flush_rows
        self.flush_s = flush_s
        self.max_pending = max_pending
        self.stats = WriterStats()
        self.degraded = False
        self.spool_error: str | None = None   # why the spool cannot be written now
        self._buffer: list[tuple[str, StagedFetch]] = []
        self._in_flight = 0
        # Events, not a lock: a thousand batches adding rows must not queue on a lock
        # handed over one event-loop turn at a time (that capped a crawl at ~1,000 rows/s).
        self._ready = asyncio.Event()     # a flush's worth is buffered (or closing)
        self._space = asyncio.Event()     # pending is under max_pending again
        self._partitions: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._parallel = max(1, parallel)
        self._slots = asyncio.Semaphore(self._parallel)
        self._flushing: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._lists = 0  # buffered seed, list and sitemap pages that discovery waits for
        self._closing = False
        self._last_flush = time.monotonic()

    async def __aenter__(self) -> StagingWriter:
        self._task = asyncio.create_task(self._run(), name=f"staging-writer-{self.owner}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pending(self) -> int:
        return len(self._buffer) + self._in_flight

    async def add(self, source_id: str, item: StagedFetch) -> None:
        self._raise_failure()
        while self.pending >= self.max_pending and not self._closing:
            self._space.clear()
            await self._space.wait()
        self._buffer.append((source_id, item))
        if _awaits_discovery(item):
            self._lists += 1
            self._ready.set()  # the flusher re-times itself: discovery waits for this page
        elif len(self._buffer) >= self.flush_rows:
            self._ready.set()

    async def probe(self) -> bool:
        """While degraded: is PostgreSQL back? (Clears ``degraded`` when it is.)"""
        if not self.degraded:
            return True
        try:
            await ping(self.pool, wait_s=2)
        except POSTGRES_AWAY:
            return False
        self.degraded = False
        return True

    async def flush(self) -> None:
        """Land everything buffered now (and wait for it and the flushes under way). Rows
        neither tier could take stay buffered for the next flush."""
        todo = len(self._buffer)
        while todo > 0:
            await self._slots.acquire()
            batch = self._take()
            if not batch:
                self._slots.release()
                break
            todo -= len(batch)
            self._start(batch)
        if self._flushing:
            await asyncio.gather(*self._flushing, return_exceptions=True)
        self._raise_failure()

    def _raise_failure(self) -> None:
        """A flush that failed other than by the database going away (a bug, bad data)
        stops the writer: its rows' leases stay held and expire back to the ledger."""
        if self._failure is not None:
            raise RuntimeError(f"staging writer stopped: {self._failure!r}") from self._failure

    async def close(self) -> None:
        self._closing = True
        self._ready.set()
        self._space.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.flush()
        if self._buffer:
            self.stats.unstaged_at_close = len(self._buffer)
            log.warning("staging: %d fetched pages could be neither staged nor spooled (%s); "
                        "their tasks go back to the queue with their leases",
                        len(self._buffer), self.spool_error or "PostgreSQL away")
            self._buffer.clear()

    async def _run(self) -> None:
        while not self._closing:
            await self._slots.acquire()
            while len(self._buffer) < self.flush_rows and not self._closing:
                every = min(self.flush_s, LIST_FLUSH_S) if self._lists else self.flush_s
                wait = every - (time.monotonic() - self._last_flush)
                if wait <= 0:
                    break
                self._ready.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ready.wait(), timeout=wait)
            batch = self._take()
            if batch:
                self._start(batch)
            else:
                self._slots.release()

    def _take(self) -> list[tuple[str, StagedFetch]]:
        """``flush_rows`` rows, or under a backlog this slot's share of it among the free
        ones (up to ``BACKLOG_FACTOR`` times as many): rows that piled up while the slots
        were busy land in fewer, larger transactions, split across the slots free now."""
        free = max(1, self._parallel - len(self._flushing))  # this slot is not in it yet
        share = -(-len(self._buffer) // free)
        size = min(max(self.flush_rows, share), self.flush_rows * BACKLOG_FACTOR)
        batch = self._buffer[:size]
        del self._buffer[:size]
        if self._lists:   # recounted only when some were buffered (a count per take is O(buffer))
            self._lists = sum(1 for _, i in self._buffer if _awaits_discovery(i))
        self._in_flight += len(batch)
        self._last_flush = time.monotonic()
        return batch

    def _start(self, batch: list[tuple[str, StagedFetch]]) -> None:
        """Land ``batch`` in the background on a flush slot the caller holds."""
        task = asyncio.create_task(self._land(batch))
        self._flushing.add(task)
        task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._flushing.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
            log.error("staging: flush failed: %r", self._failure)

    async def _land(self, batch: list[tuple[str, StagedFetch]]) -> None:
        if not batch:
            return
        items = [i for _, i in batch]
        t0 = time.monotonic()
        try:
            inserted = await self._commit(items, idempotent=False)
            self.stats.landed += inserted
            self.stats.awaiting_discovery += sum(1 for i in items if _awaits_discovery(i))
            lost = sum(1 for i in items if i.row is not None) - inserted
            if lost:
                self.stats.lost_leases += lost
                log.warning("staging: %d fetched pages dropped: their leases were reclaimed "
                            "(this worker stalled for a lease time); the tasks go again", lost)
            self.degraded = False
            self.spool_error = None
            await self._after_commit(batch)
        except POSTGRES_AWAY as e:
            # Unknown or failed commit: the spool keeps it; replays are idempotent.
            self.degraded = True
            self.stats.errors.append(f"{type(e).__name__}: {e}"[:300])
            log.warning("staging: PostgreSQL unavailable (%s); spooling %d rows", e, len(items))
            try:
                await asyncio.to_thread(self.spool.write, self.owner, items)
            except OSError as disk:
                if disk.errno not in LOCAL_STORAGE_AWAY:
                    raise
                self._hold(batch, f"{disk.strerror}: {self.spool.folder}")
            else:
                self.spool_error = None
                self.stats.spooled += len(items)
        finally:
            self.stats.flushes += 1
            self.stats.flush_seconds += time.monotonic() - t0
            self._last_flush = time.monotonic()
            self._in_flight -= len(batch)
            if self.pending < self.max_pending:
                self._space.set()

    def _hold(self, batch: list[tuple[str, StagedFetch]], reason: str) -> None:
        """Neither PostgreSQL nor the spool takes ``batch``: back to the front of the
        buffer, landed again at the next flush (``add`` blocks at ``max_pending``)."""
        if self.spool_error is None:
            log.warning("staging: PostgreSQL is away and the spool cannot be written (%s); "
                        "holding fetched pages in memory (up to %d) until either is back",
                        reason, self.max_pending)
        self.spool_error = reason
        self.stats.held += len(batch)
        self._buffer[:0] = batch
        self._lists += sum(1 for _, i in batch if _awaits_discovery(i))

    async def _commit(self, items: Sequence[StagedFetch], *, idempotent: bool) -> int:
        days = {d.isoformat() for d in {i.fetched_at.date() for i in items}} - self._partitions
        async with self.pool.connection(timeout=10) as conn:
            if days:  # own short transaction: partition DDL must not wait behind COPY
                await ensure_partitions(conn, days)
                self._partitions |= days
            for attempt in range(1, COMMIT_ATTEMPTS + 1):
                try:
                    async with conn.transaction():
                        return await land(conn, self.owner, items,
                                          idempotent=idempotent)
                except POSTGRES_BUSY as e:
                    if attempt == COMMIT_ATTEMPTS:
                        raise
                    log.info("staging: %s; landing the batch again", type(e).__name__)
        raise AssertionError("not reached: the last attempt returns or raises")

    async def _after_commit(self, batch: list[tuple[str, StagedFetch]]) -> None:
        by_source: dict[str, list[int]] = {}
        for source_id, item in batch:
            by_source.setdefault(source_id, []).append(item.outcome[0])
        fetched = [(i.url_hash, i.fetched_at.timestamp(), i.etag, i.last_modified,
                    i.content_hash, i.status) for _, i in batch if i.succeeded]
        try:
            for source_id, ids in by_source.items():
                await self.frontier.finished(source_id, ids, self.owner)
            await self.hot_urls.put_fetched(fetched)
        except Exception as e:  # the hot tier is a cache: the commit above is what counts
            log.warning("staging: hot tier update failed after commit: %s", e)
