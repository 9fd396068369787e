"""Per-source ready queues and leases in Redis: a bounded window of the ledger.

Keys (hash-tagged per source so one Lua call works on a Redis Cluster):
``sc:{<source>}:ready`` — zset of task ids, score ``(10 - priority) * 1e10 + due``;
``sc:{<source>}:leased`` — zset of leased task ids, score = lease expiry.
Redis memory stays proportional to the windows (their total held to a budget by the
frontier), not to the frontier; losing Redis
loses nothing (the ledger refills it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from stratacrawl.hot import keys as hot_keys
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.scripts import script

BAND = 1e10


ready_key = hot_keys.ready
leased_key = hot_keys.leased


def score(priority: int, due_epoch: float) -> float:
    return (10 - max(0, min(priority, 10))) * BAND + due_epoch


def due_of(score_: float) -> float:
    """The due epoch a window score holds (its priority band taken off)."""
    return score_ % BAND


async def ready_count(redis: HotRedis, source_id: str) -> int:
    """Ids in the source's ready window."""
    return int(await redis.zcard(ready_key(source_id)))


async def leased_count(redis: HotRedis, source_id: str) -> int:
    """Ids of the source leased from its window and not yet done."""
    return int(await redis.zcard(leased_key(source_id)))


async def best_scores(redis: HotRedis, source_ids: Sequence[str]) -> list[float | None]:
    """Each source's best ready score, ``None`` where its window is empty (one pipeline)."""
    async with redis.pipeline(transaction=False) as pipe:
        for s in source_ids:
            pipe.zrange(ready_key(s), 0, 0, withscores=True)
        heads = await pipe.execute()
    return [float(head[0][1]) if head else None for head in heads]


class HotQueue:
    """Ready queues and leases of all sources in one Redis."""

    def __init__(self, *, redis: HotRedis, window: int = 2000) -> None:
        self.redis = redis
        self.window = window
        self.share: int | None = None   # each source's part of a shared budget (the frontier's)
        self._claim = script(redis, "claim")
        self._admit = script(redis, "admit")

    @property
    def limit(self) -> int:
        """Ids a source's window holds at most: ``window``, or less where a budget shared
        among many sources says so."""
        return self.window if self.share is None else min(self.window, self.share)

    async def size(self, source_id: str) -> int:
        return await ready_count(self.redis, source_id)

    async def push(self, source_id: str, items: Sequence[tuple[int, int, float]]) -> None:
        """Add (id, priority, due epoch) entries; re-adding an id only updates its score."""
        if items:
            await self.redis.zadd(ready_key(source_id),
                                  {str(i): score(p, d) for i, p, d in items})

    async def admit(self, source_id: str, items: Sequence[tuple[int, int, float]]) -> int:
        """Push (id, priority, due epoch) entries, best first, while the window has room;
        returns how many did not fit (one round trip)."""
        if not items:
            return 0
        limit = self.limit
        args: list[float | str] = [limit]
        for i, p, d in items[:limit]:  # never more than a whole window fits
            args += [score(p, d), str(i)]
        left_out = int(await self._admit(keys=[ready_key(source_id)], args=args))
        return left_out + max(0, len(items) - limit)

    async def pop(self, source_id: str, n: int, lease_s: float) -> tuple[list[int], int]:
        """Take up to ``n`` due ids, best first, and record their lease; also returns how
        many ids are left in the window."""
        now = time.time()
        reply = await self._claim(keys=[ready_key(source_id), leased_key(source_id)],
                                  args=[now, n, now + lease_s])
        return [int(i) for i in reply[:-1]], int(reply[-1])

    async def done(self, source_id: str, ids: Sequence[int]) -> None:
        if ids:
            await self.redis.zrem(leased_key(source_id), *[str(i) for i in ids])

    async def renew(self, ids_by_source: dict[str, list[int]], expiry: float) -> None:
        """Move the lease expiry of leased ids (only those still in a lease set)."""
        if not ids_by_source:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for source_id, ids in ids_by_source.items():
                pipe.zadd(leased_key(source_id), {str(i): expiry for i in ids}, xx=True)
            await pipe.execute()

    async def in_flight(self, source_id: str) -> int:
        return await leased_count(self.redis, source_id)

    async def drop_expired_leases(self, source_id: str) -> int:
        return int(await self.redis.zremrangebyscore(leased_key(source_id), "-inf", time.time()))
