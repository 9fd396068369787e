"""Which sources a worker takes batches from, and how many at once.

Workers report their queue depth and latency in a heartbeat (``sc:workers``); a
worker's share of the batches in flight follows ``(1 / latency) / (1 + depth)``
relative to the others, so a slow or backed-up worker takes less and none idles
while another drowns. Sources are ordered by their best ready task
(urgent first, then the longest due).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from stratacrawl.frontier.hot_queue import BAND, ready_key
from stratacrawl.hot import keys as hot_keys
from stratacrawl.hot.client import HotRedis

WORKERS_KEY = hot_keys.WORKERS
HEARTBEAT_TTL_S = 30.0


@dataclass
class Heartbeat:
    worker: str
    depth: int            # batches queued or running on the worker
    latency_ms: float     # mean response time it observes
    in_flight: int        # requests in flight
    ts: float = 0.0


class Scheduler:
    def __init__(self, *, redis: HotRedis, max_batches: int = 64) -> None:
        self.redis = redis
        self.max_batches = max_batches

    async def beat(self, hb: Heartbeat) -> None:
        hb.ts = time.time()
        await self.redis.hset(WORKERS_KEY, hb.worker, json.dumps(asdict(hb)))

    async def leave(self, worker: str) -> None:
        await self.redis.hdel(WORKERS_KEY, worker)

    async def workers(self) -> list[Heartbeat]:
        now = time.time()
        live: list[Heartbeat] = []
        dead: list[bytes | str] = []
        for name, raw in (await self.redis.hgetall(WORKERS_KEY)).items():
            hb = Heartbeat(**json.loads(raw))
            if now - hb.ts < HEARTBEAT_TTL_S:
                live.append(hb)
            else:
                dead.append(name)
        if dead:
            await self.redis.hdel(WORKERS_KEY, *dead)
        return live

    @staticmethod
    def weight(hb: Heartbeat) -> float:
        return (1.0 / max(hb.latency_ms, 1.0)) / (1.0 + hb.depth)

    async def allowance(self, worker: str) -> int:
        """How many batches this worker should run at once, by its weight among the live ones."""
        live = await self.workers()
        if not live or all(hb.worker != worker for hb in live):
            return self.max_batches
        total = sum(self.weight(hb) for hb in live)
        mine = next(self.weight(hb) for hb in live if hb.worker == worker)
        budget = self.max_batches * len(live)
        return max(1, min(self.max_batches, math.ceil(budget * mine / total)))

    async def order(self, source_ids: Sequence[str]) -> list[str]:
        """Sources with ready tasks in their hot window, best first; then the others."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for s in source_ids:
                pipe.zrange(ready_key(s), 0, 0, withscores=True)
            heads = await pipe.execute()
        now = time.time()
        scored = []
        for s, head in zip(source_ids, heads, strict=True):
            if head:
                score = float(head[0][1])
                due = score % BAND
                scored.append((0 if due <= now else 1, score, s))
            else:
                scored.append((2, 0.0, s))
        return [s for *_, s in sorted(scored)]
