"""A source's politeness state shared by every worker, in Redis: its pace (the next free
send time), its throttle (how far 429s lowered its rate, how long a Retry-After holds it)
and its concurrency slots. The scripts in ``lua/`` change them atomically; the fetch
side's politeness (jitter, sleeping until a turn) calls the operations here.

The throttle's rule is written once, in ``lua/throttle_state.lua``, which every script
reading a throttle includes: the factor multiplies the configured rate, a 429 burst
multiplies it by ``DECREASE`` (at most once per burst) and it recovers by
``RECOVERY_PER_S`` each second up to 1. The constants are here and travel with each call.
Slots are a sorted set of holders scored by expiry: a holder not renewed within its TTL
no longer counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.exceptions import NoScriptError

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.scripts import named, script

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
        self._throttle_read = script(redis, "throttle_read")

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
            args=[named(intervals=[*intervals, *ahead], floor=floor,
                        recovery_per_s=RECOVERY_PER_S, hold_wait_s=hold_wait_s,
                        needed=len(intervals), horizon_s=horizon_s)])
        answer = answer.decode() if isinstance(answer, bytes) else str(answer)
        if answer.startswith("held:"):
            raise SourceHeld(float(answer[5:]))
        return [float(w) for w in answer.split()]

    async def throttle(self, source_id: str, retry_after_s: float | None,
                       min_gap_s: float) -> float:
        """Lower the source's factor by ``DECREASE`` unless it was lowered less than
        ``min_gap_s`` ago, and hold it ``retry_after_s`` if given; returns the factor."""
        factor = await self._throttle(keys=[keys.throttle(source_id)], args=[named(
            retry_after_s=retry_after_s or 0.0, decrease=DECREASE, min_factor=MIN_FACTOR,
            recovery_per_s=RECOVERY_PER_S, min_gap_s=min_gap_s)])
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
        """Per source: (effective rate now, seconds it is still held) — only sources that
        are throttled or held; the others send at their configured rate. For reports
        (``crawl --json``, ``/metrics``, the ops page), through the read-only script that
        applies the same rule as the pace."""
        ids = list(rates)
        args = named(recovery_per_s=RECOVERY_PER_S)
        read = self._throttle_read
        # One pipeline (a crawl asks every second): a call a source, each its own round
        # trip, was ~0.2 round trips a page on sites that answer in seconds. A server that
        # lost its script cache (a restart) is given the script again, once.
        for attempt in range(2):
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for s in ids:
                        # (EVALSHA by name: a cluster pipeline blocks its method, for
                        # the NOSCRIPT case this handles)
                        pipe.execute_command("EVALSHA", read.sha, 1, keys.throttle(s), args)
                    rows = await pipe.execute()
                break
            except NoScriptError:
                if attempt:
                    raise
                await self.redis.script_load(read.script)
        out: dict[str, tuple[float, float]] = {}
        for source_id, row in zip(ids, rows, strict=True):
            if not row:
                continue
            factor, held = (float(v) for v in row.split())
            if factor < 1.0 or held > 0:
                out[source_id] = (rates[source_id] * factor, held)
        return out

