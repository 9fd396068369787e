"""The fetch workers' heartbeats (``sc:workers``, a hash: worker -> its last report).

Each worker reports its queue depth, the latency it observes and its requests in
flight; a report older than ``HEARTBEAT_TTL_S`` is a worker that is gone, and is dropped
by the next reader.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from stratacrawl.hot import keys as hot_keys
from stratacrawl.hot.client import HotRedis

HEARTBEAT_TTL_S = 30.0


@dataclass
class Heartbeat:
    worker: str
    depth: int            # batches queued or running on the worker
    latency_ms: float     # mean response time it observes
    in_flight: int        # requests in flight
    ts: float = 0.0


async def beat(redis: HotRedis, hb: Heartbeat) -> None:
    """Record ``hb`` as the worker's report now."""
    hb.ts = time.time()
    await redis.hset(hot_keys.WORKERS, hb.worker, json.dumps(asdict(hb)))


async def leave(redis: HotRedis, worker: str) -> None:
    await redis.hdel(hot_keys.WORKERS, worker)


async def live_workers(redis: HotRedis) -> list[Heartbeat]:
    """The reports of the workers alive now; those of gone workers are removed."""
    now = time.time()
    live: list[Heartbeat] = []
    dead: list[bytes | str] = []
    for name, raw in (await redis.hgetall(hot_keys.WORKERS)).items():
        hb = Heartbeat(**json.loads(raw))
        if now - hb.ts < HEARTBEAT_TTL_S:
            live.append(hb)
        else:
            dead.append(name)
    if dead:
        await redis.hdel(hot_keys.WORKERS, *dead)
    return live
