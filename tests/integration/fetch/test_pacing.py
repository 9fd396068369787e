"""A source's pace across the requests of one process: turns asked for while a reservation
is in flight share the next script call, a fast source's turns are reserved a little
ahead, and either way they still go one interval apart."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from typing import Any

import pytest

from stratacrawl.fetch.politeness import BANK_AHEAD_S, LATE_TOLERANCE_S, SourceHeld
from stratacrawl.hot import keys
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration


turn_waits: list[list[float]] = []   # the waits of the turns each script call reserved


@pytest.fixture
def calls(comps: Components, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The turns each pace script call asks for, one entry a call (and in ``turn_waits``
    the seconds until each turn it reserved, in order)."""
    asked: list[int] = []
    turn_waits.clear()
    reserve = comps.politeness.pacing.reserve

    async def counted(source_id: str, intervals: Sequence[float], floor: float,
                      hold_wait_s: float, ahead: Sequence[float] = (),
                      horizon_s: float = 0.0) -> list[float]:
        asked.append(len(intervals))
        waits = await reserve(source_id, intervals, floor, hold_wait_s, ahead, horizon_s)
        turn_waits.append(waits)
        return waits

    monkeypatch.setattr(comps.politeness.pacing, "reserve", counted)
    return asked


async def test_turns_asked_at_once_share_a_reservation_and_keep_the_pace(
        comps: Components, calls: list[int]) -> None:
    p = comps.politeness
    rate, sent = 20.0, []   # intervals longer than BANK_AHEAD_S: no turn reserved ahead

    async def request() -> None:
        await p.wait_turn("s1", rate)
        sent.append(time.monotonic())

    await asyncio.gather(*(request() for _ in range(20)))
    # the first request's turn goes alone; the 19 asked meanwhile, in one call
    assert calls[:2] == [1, 19], calls
    sent.sort()
    # each turn at least one interval (1 / rate) after the one before: never a burst
    # (a sleep may end a clock tick early, hence the margin)
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert min(gaps) >= 0.9 / rate, [round(g, 4) for g in gaps]
    assert sent[-1] - sent[0] >= 19 * 0.9 / rate
    assert not p._asked   # nothing left waiting


async def test_a_fast_sources_turns_are_reserved_ahead_and_keep_the_pace(
        comps: Components, calls: list[int]) -> None:
    p = comps.politeness
    rate = 400.0   # 3 ms a turn on average: ~16 turns in BANK_AHEAD_S
    given: dict[asyncio.Task[Any], float] = {}   # the turn each request was given last
    sends: list[tuple[float, float]] = []        # (its turn, when it was sent)
    reserve = p._reserve

    async def noted(*args: Any) -> float:
        at = await reserve(*args)
        given[asyncio.current_task()] = at   # type: ignore[index]
        return at

    p._reserve = noted   # type: ignore[method-assign]

    async def requests(lane: int) -> None:
        for _ in range(15):   # one request after the other, as a lane sends them
            await p.wait_turn("fast", rate)
            sends.append((given.pop(asyncio.current_task()), time.monotonic()))  # type: ignore[arg-type]
            await asyncio.sleep(0.004 + lane * 0.001)

    try:
        await asyncio.gather(*(requests(lane) for lane in range(4)))
    finally:
        del p._reserve
    assert len(sends) == 60
    assert len(calls) <= 20, calls    # one call a request without the turns ahead
    # The pace lives in the turns: each script call hands out turns one interval apart
    # (at least 1 / rate), and no request is sent before its turn. When a busy event loop
    # wakes a request late, it is sent late (a turn missed by more than the tolerance is
    # given up for a new one): never early, so the 60 sends span at least 59 intervals
    # less that tolerance.
    for waits in turn_waits:
        gaps = [b - a for a, b in itertools.pairwise(waits)]
        assert not gaps or min(gaps) >= 1 / rate - 1e-6, waits
    assert all(sent >= turn for turn, sent in sends), [
        round(sent - turn, 5) for turn, sent in sends if sent < turn]
    sent = sorted(t for _, t in sends)
    assert sent[-1] - sent[0] >= 59 / rate - LATE_TOLERANCE_S

    # a turn reserved ahead is not used once its time passed: the request takes a new one
    await p.wait_turn("late", rate)
    assert p._banked[("late", 0.0)]
    await asyncio.sleep(BANK_AHEAD_S + 0.01)
    n = len(calls)
    await p.wait_turn("late", rate)
    assert len(calls) == n + 1

    # a 429 drops the turns reserved at the old pace
    assert p._banked.get(("late", 0.0))
    await p.throttle("late", rate=rate, concurrency=4, retry_after_s=None)
    assert ("late", 0.0) not in p._banked

    # turns ahead are cut at BANK_AHEAD_S from now at the pace in force: at half the
    # rate (the throttle) or with a Crawl-delay floor, fewer of them, none further out
    for delay in (None, 0.012):
        await asyncio.sleep(BANK_AHEAD_S + 0.01)   # the turns reserved so far have passed
        start = time.monotonic()
        await p.wait_turn("late", rate, delay)
        bank = p._banked[("late", delay or 0.0)]
        assert 0 < len(bank) <= BANK_AHEAD_S / (delay or 2 / rate) + 1, list(bank)
        assert max(bank) - start <= BANK_AHEAD_S + 0.01, [b - start for b in bank]


async def test_a_held_source_refuses_every_request_of_a_shared_reservation(
        comps: Components) -> None:
    p = comps.politeness
    await p.throttle("s2", rate=10.0, concurrency=2, retry_after_s=30.0)
    answers = await asyncio.gather(*(p.wait_turn("s2", 10.0) for _ in range(5)),
                                   return_exceptions=True)
    assert all(isinstance(a, SourceHeld) and a.seconds > 25 for a in answers), answers
    assert await comps.redis.get(keys.pace("s2")) is None   # no turn was reserved
    assert await p.wait_turn("s3", 10.0) >= 0   # other sources are not held
    assert not p._asked
