"""Politeness that holds across every worker: per-source pacing and concurrency slots.

Pacing: each request reserves ``interval = (1.2 ± 0.2) / rate`` seconds (or the robots
Crawl-delay if longer) on the source's shared clock in Redis, so intervals jitter by
±20 % around their mean and are never shorter than ``1 / rate``: no second ever sees
more than ``rate`` requests of a source, whichever workers send them.
The configured rate is a ceiling, not a target: a 429 (or a 503 with Retry-After) from
the site lowers the source's *effective* rate for every worker and a Retry-After holds
the whole source (AIMD, as TCP backs off; the rule is in ``hot/lua/throttle_state.lua``,
read by the same script that hands out turns).
On a fast source (intervals well under ``BANK_AHEAD_S``) a script call also reserves the
turns of the next ``BANK_AHEAD_S`` for this process's next requests, so one call serves
several: a request takes the first of them still ahead and sleeps until it, as it would
sleep until a turn just reserved, so the pace holds; a turn whose time passed unused is
lost (sending on it late would bunch it with the next) — at most ``BANK_AHEAD_S`` of the
source's turns, which other processes wait past.
Concurrency: a batch holds one of the source's ``concurrency`` slots while it runs. Slots
expire after ``SLOT_TTL_S`` unless their process renews them (every ``SLOT_RENEW_S``):
the slots of a process killed with SIGKILL are free again within seconds.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque

from stratacrawl.hot.pacing import Pacing, SourceHeld

__all__ = ["SLOT_RENEW_S", "Politeness", "SourceHeld", "interval_for"]

LATE_TOLERANCE_S = 0.02  # how late a turn may still be used (or half the interval if more)
MAX_LATE_TURNS = 3
EARLY_WAKES = 10   # sleeps at most to reach a turn a millisecond-timer loop wakes early for
MIN_CUT_GAP_S = 1.0       # decreases at least this far apart (one burst, one decrease)
HOLD_WAIT_S = 10.0        # a Retry-After hold this short is waited out; longer: tasks wait
SLOT_TTL_S = 15.0         # a slot not renewed for this long is free again
SLOT_RENEW_S = 5.0        # how often a process renews the slots it holds
BANK_AHEAD_S = 0.05       # a reservation also takes the turns this far ahead (fast sources)
MAX_BANKED = 32           # at most this many turns ahead


def interval_for(rate: float, crawl_delay: float | None, rng: random.Random) -> float:
    base = 1.0 / rate
    interval = base * (1.2 + rng.uniform(-0.2, 0.2))
    return max(interval, crawl_delay or 0.0)


class _Asked:
    """The turns of one source that this process's requests asked for while a reservation
    of that source was on its way to Redis: reserved together by the next call."""

    __slots__ = ("rate", "waiting")

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.waiting: list[tuple[float, asyncio.Future[float]]] = []


class Politeness:
    def __init__(self, *, pacing: Pacing, rng: random.Random | None = None) -> None:
        self.pacing = pacing
        self.rng = rng or random.Random()
        # per (source, floor): a reservation is in flight; the turns asked for meanwhile
        self._asked: dict[tuple[str, float], _Asked] = {}
        # per (source, floor): the time.monotonic() of turns reserved ahead, not yet
        # used, earliest first
        self._banked: dict[tuple[str, float], deque[float]] = {}
        self._reserving: set[asyncio.Task[None]] = set()

    async def wait_turn(self, source_id: str, rate: float, crawl_delay: float | None = None,
                        ) -> float:
        """Reserve this request's turn and sleep until it; returns the seconds waited.
        Raises :class:`SourceHeld` when a Retry-After holds the source longer than
        ``HOLD_WAIT_S``.

        A turn this process woke up late for (a busy event loop) is not used: sending late
        would bunch this request with the turns reserved after it, so a fresh turn is
        taken instead (a few times at most; then the request goes, late but never early).
        """
        waited = 0.0
        interval = interval_for(rate, None, self.rng)
        tolerance = max(LATE_TOLERANCE_S, interval / 2)
        for _ in range(MAX_LATE_TURNS):
            # the turn's own time (this process's clock), not a wait handed over earlier:
            # a request resumed late by a busy loop must not count its wait from then
            at = await self._reserve(source_id, rate, interval, crawl_delay or 0.0)
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                # A loop with millisecond timers (uvloop) may wake before it, and again
                # after the short sleep that follows (its clock is read once a turn of
                # the loop): slept again each time, so the request is never sent early.
                for _ in range(EARLY_WAKES):
                    early = at - time.monotonic()
                    if early <= 0:
                        break
                    await asyncio.sleep(early + 0.001)
                waited += wait
            if time.monotonic() - at <= tolerance:
                break
        return waited

    async def _reserve(self, source_id: str, rate: float, interval: float,
                       floor: float) -> float:
        """One turn of the source (its time on this process's monotonic clock): a turn
        reserved ahead if one is still usable, else from Redis, at most one reservation
        of the source on its way at a time: a request that finds one in flight waits for
        the next, which reserves the turns of every request that asked meanwhile in one
        script call (back to back, each its own interval, as one by one). A busy process
        — its lanes finish fetches faster than a round trip — pays a round trip for
        several requests instead of one each; a quiet one sends each turn at once."""
        key = (source_id, floor)
        banked = self._from_bank(key)
        if banked is not None:
            return banked
        asked = self._asked.get(key)
        if asked is not None:
            turn: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            asked.waiting.append((interval, turn))
            return await turn
        self._asked[key] = asked = _Asked(rate)
        try:
            [at] = await self._reserve_turns(key, rate, [interval])
        finally:
            self._next_reservation(key, asked)
        return at

    async def _reserve_turns(self, key: tuple[str, float], rate: float,
                             intervals: list[float]) -> list[float]:
        """The script call: these turns, and on a fast source the turns that start within
        ``BANK_AHEAD_S`` banked for the requests to come (Redis cuts them at that horizon:
        a Crawl-delay floor or a throttled pace leaves fewer); the times of ``intervals``'
        turns (this process's monotonic clock)."""
        ahead = [interval_for(rate, None, self.rng)
                 for _ in range(min(MAX_BANKED, int(BANK_AHEAD_S * rate)))]
        waits = await self.pacing.reserve(key[0], intervals, key[1], HOLD_WAIT_S,
                                          ahead, BANK_AHEAD_S)
        now = time.monotonic()
        if len(waits) > len(intervals):
            bank = self._banked.setdefault(key, deque())
            bank.extend(now + w for w in waits[len(intervals):])
        return [now + w for w in waits[:len(intervals)]]

    def _from_bank(self, key: tuple[str, float]) -> float | None:
        """The earliest turn reserved ahead that is still ahead (its time), or None."""
        bank = self._banked.get(key)
        if not bank:
            return None
        now = time.monotonic()
        while bank and bank[0] < now:
            bank.popleft()   # passed unused: lost
        if not bank:
            del self._banked[key]
            return None
        return bank.popleft()

    def _next_reservation(self, key: tuple[str, float], asked: _Asked) -> None:
        if not asked.waiting:
            del self._asked[key]
            return
        task = asyncio.create_task(self._reserve_asked(key, asked))
        self._reserving.add(task)
        task.add_done_callback(self._reserving.discard)

    async def _reserve_asked(self, key: tuple[str, float], asked: _Asked) -> None:
        """Reserve the turns asked for while the previous reservation was in flight, and
        hand each request its own; then the next group, until nobody is waiting."""
        try:
            while asked.waiting:
                group, asked.waiting = asked.waiting, []
                while group and (banked := self._from_bank(key)) is not None:
                    _, turn = group.pop(0)   # served by a turn the last call reserved ahead
                    if not turn.done():
                        turn.set_result(banked)
                if not group:
                    continue
                try:
                    waits = await self._reserve_turns(key, asked.rate, [i for i, _ in group])
                except SourceHeld as e:
                    for _, turn in group:
                        if not turn.done():
                            turn.set_exception(SourceHeld(e.seconds))
                except Exception as e:  # e.g. Redis away: each request raises it
                    for _, turn in group:
                        if not turn.done():
                            turn.set_exception(e)
                except BaseException:   # cancelled (the loop is closing): so are they
                    for _, turn in group:
                        turn.cancel()
                    raise
                else:
                    for (_, turn), at in zip(group, waits, strict=True):
                        if not turn.done():   # (a request cancelled meanwhile: unused)
                            turn.set_result(at)
        finally:
            for _, turn in asked.waiting:   # cancelled (the loop is closing)
                turn.cancel()
            del self._asked[key]

    async def throttle(self, source_id: str, rate: float, concurrency: int,
                       retry_after_s: float | None) -> float:
        """The site said "too many requests": lower the source's effective rate (once per
        burst: the requests in flight at the old pace answer 429 too) and, with a
        Retry-After, hold the whole source that long. Returns the factor now in force."""
        gap = max(MIN_CUT_GAP_S, concurrency / rate)
        for key in [k for k in self._banked if k[0] == source_id]:
            del self._banked[key]   # reserved at the old pace: not used
        return await self.pacing.throttle(source_id, retry_after_s, gap)

    async def effective_rates(self, rates: dict[str, float]) -> dict[str, tuple[float, float]]:
        """See :meth:`stratacrawl.hot.pacing.Pacing.effective_rates`."""
        return await self.pacing.effective_rates(rates)

    async def acquire_slot(self, source_id: str, holder: str, limit: int,
                           ttl_s: float = SLOT_TTL_S) -> bool:
        """Hold (or renew) one of the source's ``limit`` slots for ``ttl_s`` seconds."""
        return await self.renew_slots(source_id, [holder], limit, ttl_s) == 1

    async def renew_slots(self, source_id: str, holders: list[str], limit: int,
                          ttl_s: float = SLOT_TTL_S) -> int:
        """Renew these holders' slots of one source (one script call); returns how many
        hold one now."""
        return await self.pacing.renew_slots(source_id, holders, limit, ttl_s)

    async def release_slots(self, source_id: str, holders: list[str]) -> None:
        await self.pacing.release_slots(source_id, holders)
