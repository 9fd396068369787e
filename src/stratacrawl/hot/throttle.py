"""A source's throttle in Redis: how far 429s lowered its rate, and how long a Retry-After
holds it. Written by the pace and throttle scripts (``lua/``), which every worker's
politeness calls; read here for reports (``crawl --json``, ``/metrics``, the ops page).

The factor multiplies the configured rate. A 429 burst multiplies it by ``DECREASE`` (at
most once per burst); it recovers by ``RECOVERY_PER_S`` each second, computed from its
last change when read (no timer anywhere), up to 1: the configured rate is a ceiling.
"""

from __future__ import annotations

import asyncio
import time

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis

DECREASE = 0.5            # effective rate x this on a 429 burst
MIN_FACTOR = 1 / 64       # never below this share of the configured rate
RECOVERY_PER_S = 0.005    # + 0.5 % of the configured rate a second: 1/8 → 1 in ~3 minutes


throttle_key = keys.throttle


async def effective_rates(redis: HotRedis, rates: dict[str, float],
                          ) -> dict[str, tuple[float, float]]:
    """Per source: (effective rate now, seconds it is still held) — only sources that are
    throttled or held; the others send at their configured rate."""
    ids = list(rates)
    rows = await asyncio.gather(*(redis.hmget(throttle_key(s), "factor", "at", "hold")
                                  for s in ids))
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
