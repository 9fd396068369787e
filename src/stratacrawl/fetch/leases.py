"""Lease upkeep of one crawl process: its leases renewed while its batches run and its
pages wait in the staging writer, the leases of dead runs reclaimed, its heartbeat beaten
— on a connection of its own, so it is never queued behind the fetching."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.runs import BEAT_S, DEAD_AFTER, LOCK_STEADY_S, Runs
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.tier_errors import POSTGRES_AWAY, POSTGRES_BUSY

log = logging.getLogger(__name__)
RECLAIM_EVERY_S = 5.0  # a dead run's tasks go back to the living this often


async def keep_leases(frontier: Frontier,
                      stores: Callable[[], AbstractAsyncContextManager[tuple[Ledger, Runs]]],
                      owner: str, stop: asyncio.Event) -> None:
    """Renew ``owner``'s leases every third of a lease time (batches running, pages waiting
    in the staging writer) and reclaim expired ones (a worker killed mid-batch) every
    ``RECLAIM_EVERY_S``, until ``stop``. Neither ever stops a crawl. Upkeep has a
    connection of its own (``stores`` opens the ledger and the runs on it)."""
    async with stores() as (ledger, runs):
        await _keep_leases(frontier, owner, stop, ledger, runs)


async def _keep_leases(frontier: Frontier, owner: str, stop: asyncio.Event,
                       ledger: Ledger, runs: Runs) -> None:
    """The loop of :func:`keep_leases`; it also beats this run's heartbeat every
    ``BEAT_S``. Dead runs' leases are reclaimed only once this run has beaten for
    ``DEAD_AFTER`` without a gap: after a PostgreSQL outage every run's last beat is old,
    and the living must get a beat in before anyone counts them dead. A run whose
    advisory lock nobody holds (its process died, its connection closed) is dead at
    once; that is judged after ``LOCK_STEADY_S`` of beating, by when every living run has
    taken its lock again after an outage."""
    lease_s = frontier.lease.total_seconds()
    renew_every = max(0.2, lease_s / 3)
    next_renewal = time.monotonic() + renew_every
    next_reclaim = next_beat = time.monotonic()
    healthy_since: float | None = None
    requeue = _Requeue(frontier, ledger)
    try:
        while not stop.is_set():
            now = time.monotonic()
            try:
                if now >= next_beat:
                    next_beat = now + BEAT_S
                    if healthy_since is None:
                        await runs.start(owner)   # (again after an outage: the lock too)
                        healthy_since = time.monotonic()
                    else:
                        await runs.beat(owner)
                if now >= next_renewal:
                    next_renewal = now + renew_every
                    renewed, gone = await frontier.renew(owner, ledger)
                    log.debug("crawl: %d leases renewed, %d ended", renewed, gone)
                if now >= next_reclaim:
                    next_reclaim = now + min(RECLAIM_EVERY_S, renew_every)
                    healthy = time.monotonic() - healthy_since if healthy_since is not None else 0
                    steady = healthy >= DEAD_AFTER.total_seconds()
                    if healthy_since is not None and healthy < LOCK_STEADY_S:
                        next_reclaim = min(next_reclaim, healthy_since + LOCK_STEADY_S)
                    sources, n = await frontier.release_expired(
                        ledger, DEAD_AFTER if steady else None, by_lock=healthy >= LOCK_STEADY_S)
                    if n:
                        log.info("crawl: %d leases reclaimed (expired, or their run is dead)", n)
                        requeue.add(sources)
            except (*POSTGRES_AWAY, *POSTGRES_BUSY) as e:  # PostgreSQL away or busy: next round
                healthy_since = None
                log.warning("crawl: lease upkeep paused (%s)", e)
            except Exception as e:  # Redis away: the ledger is what counts
                log.warning("crawl: lease upkeep failed (%r)", e)
            wait = min(next_renewal, next_reclaim, next_beat) - time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=max(0.05, wait))
    finally:
        await requeue.stop()


class _Requeue:
    """The hot half of a reclaim (each source's window refilled from the top: a ledger read
    per source) in a task of its own, one at a time: run inline, after a dead worker of
    a 200-source crawl it held the upkeep for a minute, no lease was renewed meanwhile,
    and the living workers' leases expired in turn — thousands of fetched pages were
    dropped and fetched again. The reclaimed tasks are ready in the ledger at once; only
    their way back into the windows waits."""

    def __init__(self, frontier: Frontier, ledger: Ledger) -> None:
        self.frontier, self.ledger = frontier, ledger
        self._sources: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def add(self, sources: set[str]) -> None:
        self._sources |= sources
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while self._sources:
            sources, self._sources = self._sources, set()
            try:
                await self.frontier.requeue(sources, self.ledger)
            except Exception as e:  # a claim's refill brings them later
                log.warning("crawl: reclaimed tasks not requeued in the hot tier (%r)", e)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
