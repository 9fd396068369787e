"""Hot eviction: when Redis passes its memory budget, the hot URL states with the lowest
``hits / (now - last_access) ** 0.5`` go first (LFU with recency, approximated over a
random sample as Redis itself does). Their hits and last access are written back to cold
first, so nothing is lost: a re-referenced URL is promoted back by dedup.

Everything else in hot either expires by TTL (sessions, parse cache, robots) or is
bounded by construction (ready windows, the Bloom filter)."""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.url_state import write_access
from stratacrawl.hot.client import HotRedis, used_memory_bytes
from stratacrawl.hot.url_state import access_of, fingerprint_batches, forget


@dataclass
class EvictStats:
    used_before_mb: float = 0.0
    used_after_mb: float = 0.0
    evicted: int = 0
    rounds: int = 0


def score(hits: int, last_access: float, now: float) -> float:
    return hits / math.sqrt(max(now - last_access, 1.0))


async def used_mb(redis: HotRedis) -> float:
    return await used_memory_bytes(redis) / 1e6


async def _sample(redis: HotRedis, n: int) -> list[str]:
    """About ``n`` fingerprints of hot URL states (the first the keyspace scan meets)."""
    batches = fingerprint_batches(redis, n)
    async with contextlib.aclosing(batches):
        async for fps in batches:
            return fps
    return []


async def evict_hot(redis: HotRedis, pool: AsyncConnectionPool, *, budget_mb: float,
                    sample: int = 5000, share: float = 0.25, max_rounds: int = 50,
                    now: float | None = None) -> EvictStats:
    """Evict until used memory is under ``budget_mb`` (or nothing evictable is left)."""
    stats = EvictStats(used_before_mb=await used_mb(redis))
    used = stats.used_before_mb
    while used > budget_mb and stats.rounds < max_rounds:
        stats.rounds += 1
        fps = await _sample(redis, sample)
        if not fps:
            break
        t = now or time.time()
        scored = sorted(
            (score(h, la or 0.0, t), fp, h, la or 0.0)
            for fp, (h, la) in zip(fps, await access_of(redis, fps), strict=True))
        victims = scored[:max(1, int(len(scored) * share))]
        # durable copy first, then drop from hot
        await write_access(pool, [v[1] for v in victims], [v[2] for v in victims],
                           [v[3] for v in victims])
        await forget(redis, [v[1] for v in victims])
        stats.evicted += len(victims)
        used = await used_mb(redis)
    stats.used_after_mb = used
    return stats
