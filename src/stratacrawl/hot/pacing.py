"""A source's politeness state shared by every worker, in Redis: its pace (the next free
send time), its throttle (how far 429s lowered its rate, how long a Retry-After holds it)
and its concurrency slots. The scripts in ``lua/`` change them atomically; the fetch
side's politeness (jitter, sleeping until a turn) calls the operations here.

The throttle factor multiplies the configured rate. A 429 burst multiplies it by
``DECREASE`` (at most once per burst); it recovers by ``RECOVERY_PER_S`` each second,
computed from its last change when read (no timer anywhere), up to 1: the configured rate
is a ceiling. Slots are a sorted set of holders scored by expiry: a holder not renewed
within its TTL no longer counts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.scripts import script

DECREASE = 0.5            # effective rate x this on a 429 burst
MIN_FACTOR = 1 / 64       # never below this share of the configured rate
RECOVERY_PER_S = 0.005    # + 0.5 % of the configured rate a second: 1/8 → 1 in ~3 minutes


class SourceHeld(Exception):
    """The source is held (Retry-After) for ``seconds`` more: do not send now."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"source held for {seconds:.1f} s (Retry-After)")


class Pacing:
    """The pace, throttle and slot operations of all sources in one Redis."""

    def __init__(self, *, redis: HotRedis) -> None:
        self.redis = redis
        self._pace = script(redis, "pace")
        self._slot_renew = script(redis, "slot_renew")
        self._throttle = script(redis, "throttle")

    async def reserve(self, source_id: str, intervals: Sequence[float], floor: float,
                      hold_wait_s: float, ahead: Sequence[float] = (),
                      horizon_s: float = 0.0) -> list[float]:
        """Reserve the source's next turns, one per interval, back to back: each
        ``interval`` seconds at the configured rate (stretched by the throttle factor), at
        least ``floor`` (Crawl-delay); then, one per interval of ``ahead``, the turns
        after them that start within ``horizon_s`` of now. Returns the seconds until each
        turn reserved (all of ``intervals``' first). Raises :class:`SourceHeld` when a
        Retry-After holds the source longer than ``hold_wait_s`` (nothing is reserved
        then)."""
        answer = await self._pace(
            keys=[keys.pace(source_id), keys.throttle(source_id)],
            args=[" ".join(f"{i:.6f}" for i in (*intervals, *ahead)), f"{floor:.6f}",
                  RECOVERY_PER_S, hold_wait_s, len(intervals), f"{horizon_s:.6f}"])
        answer = answer.decode() if isinstance(answer, bytes) else str(answer)
        if answer.startswith("held:"):
            raise SourceHeld(float(answer[5:]))
        return [float(w) for w in answer.split()]

    async def throttle(self, source_id: str, retry_after_s: float | None,
                       min_gap_s: float) -> float:
        """Lower the source's factor by ``DECREASE`` unless it was lowered less than
        ``min_gap_s`` ago, and hold it ``retry_after_s`` if given; returns the factor."""
        factor = await self._throttle(keys=[keys.throttle(source_id)], args=[
            f"{retry_after_s or 0.0:.3f}", DECREASE, MIN_FACTOR, RECOVERY_PER_S,
            f"{min_gap_s:.3f}"])
        return float(factor)

    async def renew_slots(self, source_id: str, holders: list[str], limit: int,
                          ttl_s: float) -> int:
        """Hold or renew these holders' slots of one source for ``ttl_s`` (at most
        ``limit`` holders at once); returns how many hold one now."""
        if not holders:
            return 0
        return int(await self._slot_renew(keys=[keys.slots(source_id)],
                                          args=[limit, ttl_s, *holders]))

    async def release_slots(self, source_id: str, holders: list[str]) -> None:
        if holders:
            await self.redis.zrem(keys.slots(source_id), *holders)

    async def effective_rates(self, rates: dict[str, float],
                              ) -> dict[str, tuple[float, float]]:
        """See :func:`effective_rates`."""
        return await effective_rates(self.redis, rates)


async def effective_rates(redis: HotRedis, rates: dict[str, float],
                          ) -> dict[str, tuple[float, float]]:
    """Per source: (effective rate now, seconds it is still held) — only sources that are
    throttled or held; the others send at their configured rate. For reports
    (``crawl --json``, ``/metrics``, the ops page)."""
    ids = list(rates)
    # One pipeline (a crawl asks every second): a command a source, each its own round
    # trip, was ~0.2 round trips a page on sites that answer in seconds.
    async with redis.pipeline(transaction=False) as pipe:
        for s in ids:
            pipe.hmget(keys.throttle(s), "factor", "at", "hold")
        rows = await pipe.execute()
    now = time.time()
    out: dict[str, tuple[float, float]] = {}
    for source_id, (factor, at, hold) in zip(ids, rows, strict=True):
        if factor is None:
            continue
        f = min(1.0, float(factor) + (now - float(at or now)) * RECOVERY_PER_S)
        held = max(0.0, float(hold or 0) - now)
        if f < 1.0 or held > 0:
            out[source_id] = (rates[source_id] * f, held)
    return out
