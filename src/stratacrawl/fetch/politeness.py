"""Politeness that holds across every worker: per-source pacing and concurrency slots.

Pacing: each request reserves ``interval = (1.2 ± 0.2) / rate`` seconds (or the robots
Crawl-delay if longer) on the source's shared clock in Redis, so intervals jitter by
±20 % around their mean and are never shorter than ``1 / rate``: no second ever sees
more than ``rate`` requests of a source, whichever workers send them.
Concurrency: a batch holds one of the source's ``concurrency`` slots while it runs.
"""

from __future__ import annotations

import asyncio
import random
import time

from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.scripts import script

LATE_TOLERANCE_S = 0.02  # how late a turn may still be used (or half the interval if more)
MAX_LATE_TURNS = 3


def pace_key(source_id: str) -> str:
    return f"sc:{{{source_id}}}:pace"


def slots_key(source_id: str) -> str:
    return f"sc:{{{source_id}}}:slots"


def interval_for(rate: float, crawl_delay: float | None, rng: random.Random) -> float:
    base = 1.0 / rate
    interval = base * (1.2 + rng.uniform(-0.2, 0.2))
    return max(interval, crawl_delay or 0.0)


class Politeness:
    def __init__(self, *, redis: HotRedis, rng: random.Random | None = None) -> None:
        self.redis = redis
        self.rng = rng or random.Random()
        self._pace = script(redis, "pace")
        self._slot = script(redis, "slot")

    async def wait_turn(self, source_id: str, rate: float, crawl_delay: float | None = None,
                        ) -> float:
        """Reserve this request's turn and sleep until it; returns the seconds waited.

        A turn this process woke up late for (a busy event loop) is not used: sending late
        would bunch this request with the turns reserved after it, so a fresh turn is
        taken instead (a few times at most; then the request goes, late but never early).
        """
        waited = 0.0
        interval = interval_for(rate, crawl_delay, self.rng)
        tolerance = max(LATE_TOLERANCE_S, interval / 2)
        for _ in range(MAX_LATE_TURNS):
            wait = float(await self._pace(keys=[pace_key(source_id)], args=[f"{interval:.6f}"]))
            if wait <= 0:
                return waited
            due = time.monotonic() + wait
            await asyncio.sleep(wait)
            waited += wait
            if time.monotonic() - due <= tolerance:
                break
        return waited

    async def acquire_slot(self, source_id: str, holder: str, limit: int, ttl_s: float) -> bool:
        """Hold (or renew) one of the source's ``limit`` slots for ``ttl_s`` seconds."""
        return bool(await self._slot(keys=[slots_key(source_id)], args=[holder, limit, ttl_s]))

    async def release_slot(self, source_id: str, holder: str) -> None:
        await self.redis.zrem(slots_key(source_id), holder)

    async def pause(self, source_id: str, seconds: float) -> None:
        """Nobody sends to this source for ``seconds`` (robots 5xx, Retry-After)."""
        await self._pace(keys=[pace_key(source_id)], args=[f"{seconds:.6f}"])
