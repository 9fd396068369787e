"""Which sources a worker takes batches from, and how many at once.

Workers report their queue depth and latency in a heartbeat (``sc:workers``); a
worker's share of the batches in flight follows ``(1 / latency) / (1 + depth)``
relative to the others, so a slow or backed-up worker takes less and none idles
while another drowns. Sources are ordered by their best ready task
(urgent first, then the longest due).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from stratacrawl.hot import workers as heartbeats
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.queue import best_scores, due_of
from stratacrawl.hot.workers import Heartbeat


class Scheduler:
    def __init__(self, *, redis: HotRedis, max_batches: int = 64) -> None:
        self.redis = redis
        self.max_batches = max_batches

    async def beat(self, hb: Heartbeat) -> None:
        await heartbeats.beat(self.redis, hb)

    async def leave(self, worker: str) -> None:
        await heartbeats.leave(self.redis, worker)

    async def workers(self) -> list[Heartbeat]:
        return await heartbeats.live_workers(self.redis)

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
        now = time.time()
        scored = []
        for s, best in zip(source_ids, await best_scores(self.redis, source_ids), strict=True):
            if best is None:
                scored.append((2, 0.0, s))
            else:
                scored.append((0 if due_of(best) <= now else 1, best, s))
        return [s for *_, s in sorted(scored)]
