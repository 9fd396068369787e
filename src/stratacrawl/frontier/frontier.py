"""The frontier facade: the ledger is the truth, the hot queue a bounded window of it.

A claim pops due ids from the source's hot queue (one Lua call) and leases them in the
ledger with a guarded UPDATE: an id that another claimer got first, or that is no
longer ready, is simply not returned. So N claimers never lease one task twice, and a
Redis that lost everything is refilled from the ledger on the next claim.

Leases are kept alive by their holder: the frontier remembers what each owner of this
process claimed and ``renew`` extends all of it (one UPDATE) until it is finished —
including pages fetched but still in the staging writer's buffer. So ``reclaim`` may run
at any time in any process: only a holder that stopped renewing (killed, hung for a
whole lease) loses its tasks to the others.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from psycopg import AsyncConnection

from stratacrawl.cold.ledger import Ledger, ReadyCursor
from stratacrawl.cold.tasks import Batch, NewTask, Outcome
from stratacrawl.hot.queue import HotQueue

LEVEL2_DELAY = timedelta(minutes=15)
# Ready windows share one budget of entries (~100 B each in Redis): each source's window is
# the budget divided by the sources with ready work, between these bounds — so Redis holds
# a bounded number of ids whether 50 sources or 10,000 have work queued.
MIN_WINDOW = 64
WINDOW_REFIT_S = 60.0
MAX_POPS = 20  # per claim: enough to skip a window's worth of stale ids
DRAINED_RECHECK_S = 2.0  # a window holding all of a source's ready work: look again after


class Frontier:
    """Enqueue, claim in batches, complete, reclaim."""

    def __init__(self, *, ledger: Ledger, hot: HotQueue, lease: timedelta = timedelta(minutes=5),
                 refill_horizon: timedelta = timedelta(seconds=2),
                 window_budget: int | None = None) -> None:
        self.ledger = ledger
        self.hot = hot
        self.lease = lease
        self.refill_horizon = refill_horizon
        self.window_budget = window_budget   # None: every source gets the hot queue's window
        self._refit_at = 0.0
        self._cursor: dict[str, ReadyCursor] = {}  # per source: where the last refill stopped
        self._drained: dict[str, float] = {}  # per source: the window held all ready work
        # per owner: task id -> (source, claim number) of every lease it holds here
        self._held: dict[str, dict[int, tuple[str, int]]] = {}
        self._claims = 0

    async def add(self, tasks: Sequence[NewTask],
                  on_conflict: Literal["skip", "requeue", "urgent"] = "skip") -> int:
        queued = await self.ledger.enqueue(tasks, on_conflict=on_conflict)
        if on_conflict == "urgent":
            for source_id in {t.source_id for t in tasks}:
                await self.refill(source_id, force=True)
        else:
            await self._admit(queued)
        return len(queued)

    async def _admit(self, queued: Sequence[tuple[str, int, int, float]]) -> None:
        """New tasks due soon go straight into their source's window while it has room, so
        a window that held all ready work still does and claims need not re-read the
        ledger (with discovery adding links all the time, they re-read it on every claim);
        what does not fit makes the next claim refill."""
        horizon = time.time() + self.refill_horizon.total_seconds()
        by_source: dict[str, list[tuple[int, int, float]]] = {}
        for source_id, task_id, priority, due in queued:
            by_source.setdefault(source_id, []).append((task_id, priority, due))
        for source_id, items in by_source.items():
            soon = sorted((i for i in items if i[2] <= horizon), key=lambda i: (-i[1], i[2], i[0]))
            left_out = await self.hot.admit(source_id, soon)
            if left_out or len(soon) < len(items):
                self._drained.pop(source_id, None)  # the ledger holds more than the window

    def fit_window(self, sources: int) -> int:
        """Size every source's window for ``sources`` sources with ready work: the budget
        shared out, at least ``MIN_WINDOW`` and at most the hot queue's ``window``."""
        if self.window_budget is not None:
            self.hot.share = max(self.window_budget // max(sources, 1), MIN_WINDOW)
            self._refit_at = time.monotonic() + WINDOW_REFIT_S
        return self.hot.limit

    async def _refit(self) -> None:
        """Count the sources with ready work again, once a ``WINDOW_REFIT_S`` (one probe of
        the ready index per source)."""
        if self.window_budget is not None and time.monotonic() >= self._refit_at:
            self.fit_window(len(await self.ledger.sources_with_ready_tasks()))

    async def refill(self, source_id: str, force: bool = False, *, resume: bool = False,
                     ledger: Ledger | None = None) -> int:
        """Top the hot window up from the ledger when it is below half (or when forced).

        ``resume`` continues after the task the previous refill of this process stopped at
        (claims do: the window holds what came before); a page shorter than the window means
        the end was reached, and the next refill starts from the top again, where new, retried
        and re-armed tasks are. Urgent work, reclaims and recovery refill from the top.
        ``ledger``: read through this one (on a pool of its own) instead."""
        await self._refit()
        if not force and await self.hot.size(source_id) >= self.hot.limit // 2:
            return 0
        after = self._cursor.get(source_id) if resume else None
        items, cursor = await (ledger or self.ledger).ready_page(
            source_id, self.hot.limit, self.refill_horizon, after)
        if cursor is None or len(items) < self.hot.limit:
            self._cursor.pop(source_id, None)
            self._drained[source_id] = time.monotonic() + DRAINED_RECHECK_S
        else:
            self._cursor[source_id] = cursor
        await self.hot.push(source_id, items)
        return len(items)

    async def claim(self, source_id: str, n: int, owner: str) -> Batch:
        """Up to ``n`` due tasks of one source, leased to ``owner``, best first."""
        batch = Batch(source_id=source_id, batch_id=uuid.uuid4().hex[:16])
        refilled = False
        for _ in range(MAX_POPS):
            ids, left = await self.hot.pop(source_id, n, self.lease.total_seconds())
            brought = 0
            if ids:  # leased first: a refill below must not read them as still ready
                batch.tasks = await self.ledger.claim_ids(ids, owner, self.lease, batch.batch_id)
                self._hold(owner, source_id, [t.id for t in batch.tasks])
                stale = set(ids) - {t.id for t in batch.tasks}
                if stale:  # leased, finished or rescheduled behind the window's back: drop
                    await self.hot.done(source_id, list(stale))
            # Below half: top up — unless the last refill found the ledger had nothing
            # beyond the window (then only an empty window, or time, warrants a look).
            drained = self._drained.get(source_id, 0.0) > time.monotonic()
            if left < self.hot.limit // 2 and not refilled and (not drained or not ids):
                refilled = True
                brought = await self.refill(source_id, force=True, resume=True)
                if not ids:
                    continue  # the window was empty: pop again from what the refill brought
            if not ids or batch.tasks:  # nothing due (even after a refill), or a batch
                # fewer than asked: the window had no more due; nothing came in after this
                # pop, and the ledger held nothing beyond the window when last looked at
                batch.took_all_due = (len(ids) < n and not brought
                                      and self._drained.get(source_id, 0.0) > time.monotonic())
                break
        return batch

    async def complete(self, source_id: str, outcomes: Sequence[Outcome], owner: str,
                       conn: AsyncConnection | None = None) -> int:
        """Record outcomes (in ``conn``'s transaction when given) and drop the hot leases."""
        applied = await self.ledger.finish(outcomes, owner, conn)
        await self.finished(source_id, [o.task_id for o in outcomes], owner)
        return applied

    async def finished(self, source_id: str, ids: Sequence[int], owner: str) -> None:
        """These leases ended (their outcome committed): stop renewing them, drop them hot."""
        held = self._held.get(owner, {})
        for i in ids:
            held.pop(i, None)
        await self.hot.done(source_id, ids)

    async def delay(self, batch: Batch, owner: str, delay: timedelta = LEVEL2_DELAY) -> int:
        """Level-2 retry: the whole batch waits (``RETRY_WAIT``) and is due again later."""
        ids = [t.id for t in batch.tasks]
        n = await self.ledger.release(ids, owner, due_at=datetime.now(UTC) + delay)
        await self.finished(batch.source_id, ids, owner)
        return n

    def _hold(self, owner: str, source_id: str, ids: Sequence[int]) -> None:
        self._claims += 1
        held = self._held.setdefault(owner, {})
        for i in ids:
            held[i] = (source_id, self._claims)

    def held(self, owner: str) -> int:
        """How many leases ``owner`` holds in this process."""
        return len(self._held.get(owner, {}))

    async def renew(self, owner: str, ledger: Ledger | None = None) -> tuple[int, int]:
        """Extend every lease ``owner`` holds here by a lease time (ledger and hot lease
        sets); returns (renewed, gone). A lease the ledger no longer shows as this owner's
        (finished, or reclaimed after this process stalled for a lease time) is forgotten."""
        held = self._held.get(owner)
        if not held:
            return 0, 0
        sent = dict(held)
        kept = set(await (ledger or self.ledger).renew(list(sent), owner, self.lease))
        gone = 0
        for i, entry in sent.items():
            if i not in kept and held.get(i) == entry:  # not re-claimed since the snapshot
                del held[i]
                gone += 1
        by_source: dict[str, list[int]] = {}
        for i in kept:
            by_source.setdefault(sent[i][0], []).append(i)
        await self.hot.renew(by_source, time.time() + self.lease.total_seconds())
        return len(kept), gone

    async def reclaim(self, ledger: Ledger | None = None,
                      dead_after: timedelta | None = None, by_lock: bool = False) -> int:
        """Expired leases back to PENDING (ledger), and out of the hot lease sets; with
        ``dead_after`` or ``by_lock`` also the leases of dead runs (see
        :meth:`Ledger.reclaim_expired`); returns how many. :meth:`release_expired` and
        :meth:`requeue` are its two halves, for a caller that must not wait for the
        second (lease upkeep)."""
        sources, n = await self.release_expired(ledger, dead_after, by_lock)
        await self.requeue(sources, ledger)
        return n

    async def release_expired(self, ledger: Ledger | None = None,
                              dead_after: timedelta | None = None, by_lock: bool = False,
                              ) -> tuple[set[str], int]:
        """The ledger half of :meth:`reclaim` (one statement): the sources whose windows
        must be refilled (:meth:`requeue`) and how many leases went back. ``ledger``: one
        on a pool of its own (lease upkeep must not queue behind batches)."""
        reclaimed = await (ledger or self.ledger).reclaim_expired(dead_after, by_lock)
        return {s for s, _ in reclaimed}, len(reclaimed)

    async def requeue(self, source_ids: Iterable[str], ledger: Ledger | None = None) -> None:
        """The hot half of :meth:`reclaim`: each source's expired hot leases dropped and its
        window refilled from the top, where the reclaimed tasks are again (a read of the
        ledger per source: after a dead worker of a crawl of 200 sources, a minute's work
        when each waits for the crawl's busy pool; ``ledger`` on a pool of its own)."""
        for source_id in source_ids:
            await self.hot.drop_expired_leases(source_id)
            await self.refill(source_id, force=True, ledger=ledger)
