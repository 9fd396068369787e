"""The concurrency slots one fetch process holds, by source.

A request in flight holds one of its source's cluster-wide slots (in Redis, through
:class:`~stratacrawl.fetch.politeness.Politeness`). A batch starts under one slot and its
lanes take more while the source has free ones; a slot nobody uses any more stays with the
process ``SPARE_S`` (still renewed, still counted against the source), so the source's next
claim or lane takes it without a script call, then goes back to Redis. Every slot held is
renewed every ``SLOT_RENEW_S`` (:meth:`Slots.keep`): a killed process's slots expire.

The book is kept as it changes — the slots held per source plus those being asked for
right now (``_mine``), the spares per source — so the checks made on every claim and lane
(:meth:`Slots.room`, :meth:`Slots.in_flight`) are O(1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter

from stratacrawl.fetch.politeness import SLOT_RENEW_S, Politeness
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.tier_errors import TIER_DOWN

log = logging.getLogger(__name__)
SPARE_S = 0.25       # a slot no lane uses is kept this long for the source's next claim


class Slots:
    """The slots of process ``run_id`` for ``sources``. ``held``: slot holder → its source,
    one per request in flight (spares included)."""

    def __init__(self, *, politeness: Politeness, sources: SourcesFile, run_id: str) -> None:
        self.politeness = politeness
        self.sources = sources
        self.run_id = run_id
        self.held: dict[str, str] = {}
        # Set when the worker stops: a slot given up goes back to Redis at once.
        self.stopping = False
        # by source: the slots in ``held`` (changed only with it, by ``hold`` and
        # ``give_back``) plus those being asked for (a script call in flight) — what this
        # process holds of a source or may hold in a moment
        self._mine: Counter[str] = Counter()
        # by source: slots given up but kept for ``SPARE_S``: (holder, since)
        self._spare: dict[str, list[tuple[str, float]]] = {}
        self._spares = 0   # in ``_spare``, all sources

    def in_flight(self) -> int:
        """Slots held for requests (spare ones not counted)."""
        return len(self.held) - self._spares

    def room(self, source: Source) -> int:
        """Slots of ``source`` that may be free: its concurrency less what this process
        holds of it or is asking for. Where this process fills a source alone, none is
        free, and asking Redis would cost a script call for nothing (on slow sites,
        where batches of one source run side by side, one a fetch)."""
        return source.concurrency - self._mine[source.id] + len(self._spare.get(source.id, ()))

    def hold(self, holder: str, source_id: str) -> None:
        """A slot Redis gave ``holder``, in ``held``."""
        if holder not in self.held:
            self.held[holder] = source_id
            self._mine[source_id] += 1

    async def acquire(self, source: Source, holder: str) -> None:
        """Wait for a slot of ``source`` for ``holder`` (a batch claimed without one)."""
        await self.politeness.acquire_slot(source.id, holder, source.concurrency)
        self.hold(holder, source.id)

    async def for_claim(self, source: Source) -> str | None:
        """A slot to claim a batch under: a spare one, or one Redis gives now; None when
        the source is full."""
        holder = self.take_spare(source.id)
        if holder is not None:
            return holder
        holder = f"{self.run_id}:{uuid.uuid4().hex[:16]}"
        self._mine[source.id] += 1
        try:
            if not await self.politeness.acquire_slot(source.id, holder, source.concurrency):
                return None
        finally:
            self._mine[source.id] -= 1
        self.hold(holder, source.id)
        return holder

    async def more(self, source: Source, batch_id: str, wanted: int) -> list[str]:
        """Holders of up to ``wanted`` more slots of the source (spares first, then one
        script call): as many as it has free now."""
        wanted = min(wanted, self.room(source))
        taken: list[str] = []
        while len(taken) < wanted and (spare := self.take_spare(source.id)) is not None:
            taken.append(spare)
        wanted -= len(taken)
        if wanted <= 0:
            return taken
        holders = [f"{self.run_id}:{batch_id}:{uuid.uuid4().hex[:8]}" for _ in range(wanted)]
        self._mine[source.id] += wanted
        try:
            given = holders[:await self.politeness.renew_slots(source.id, holders,
                                                               source.concurrency)]
        finally:
            self._mine[source.id] -= wanted
        for h in given:
            self.hold(h, source.id)
        return taken + given

    async def release(self, source_id: str, holder: str) -> None:
        """A slot this process has no more use for: kept spare for ``SPARE_S`` (the next
        claim or lane of its source takes it) unless the worker is stopping."""
        if self.stopping or holder not in self.held:
            await self.give_back(source_id, [holder])
        else:
            self._spare.setdefault(source_id, []).append((holder, time.monotonic()))
            self._spares += 1

    def take_spare(self, source_id: str) -> str | None:
        """A spare slot of the source (the latest), or None."""
        spare = self._spare.get(source_id)
        if not spare:
            return None
        holder, _ = spare.pop()
        self._spares -= 1
        if not spare:
            del self._spare[source_id]
        return holder

    async def give_back_spares(self, older_than: float | None = None) -> None:
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
            await self.give_back(source_id, holders)

    async def give_back(self, source_id: str, holders: list[str]) -> None:
        """Slots given back: in Redis unless a tier is down (then they expire after
        ``SLOT_TTL_S``), then in ``held`` — until Redis has them back, this process counts
        them as its own and asks for no slot Redis cannot give yet."""
        try:
            with contextlib.suppress(*TIER_DOWN):
                await self.politeness.release_slots(source_id, holders)
        finally:
            for holder in holders:
                if self.held.pop(holder, None) is not None:
                    self._mine[source_id] -= 1

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew every slot held every ``SLOT_RENEW_S`` until ``stop``: a slot lives
        ``SLOT_TTL_S`` unless renewed, so a killed process's slots free up within seconds
        (not after a long per-batch timeout). Never stops a crawl."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SLOT_RENEW_S)
            by_source: dict[str, list[str]] = {}
            for holder, source_id in list(self.held.items()):
                by_source.setdefault(source_id, []).append(holder)
            try:
                await asyncio.gather(*(self.politeness.renew_slots(
                    sid, holders, self.sources.get(sid).concurrency)
                    for sid, holders in by_source.items()))
            except Exception as e:  # Redis away: slots come back when it does
                log.warning("fetch: slots not renewed: %r", e)
