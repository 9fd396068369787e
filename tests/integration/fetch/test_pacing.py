"""A source's pace across the requests of one process: turns asked for while a reservation
is in flight share the next script call, and still go one interval apart."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence

import pytest

from stratacrawl.fetch.politeness import SourceHeld
from stratacrawl.hot import keys
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration


async def test_turns_asked_at_once_share_a_reservation_and_keep_the_pace(
        comps: Components, monkeypatch: pytest.MonkeyPatch) -> None:
    p = comps.politeness
    calls: list[int] = []
    reserve = p.pacing.reserve

    async def counted(source_id: str, intervals: Sequence[float], floor: float,
                      hold_wait_s: float) -> list[float]:
        calls.append(len(intervals))
        return await reserve(source_id, intervals, floor, hold_wait_s)

    monkeypatch.setattr(p.pacing, "reserve", counted)
    rate, sent = 50.0, []

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
