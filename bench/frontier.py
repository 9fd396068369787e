"""frontier: 5 M queued tasks at bounded memory, and claims/s across 4 claimer processes.

Figures: ``redis_used_memory_mb`` (Redis used_memory with the whole frontier queued and
hot windows full), ``frontier_process_rss_mb`` (RSS of the process that enqueued and
claimed), ``claims_per_s`` (4 processes claiming batches through the hot queues with
the ledger guard; every id checked for double claims). Baseline for claims: the same 4
processes claiming straight from the ledger with ``FOR UPDATE SKIP LOCKED``.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import redis
import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime, rss_mb
from stratacrawl.cold.tasks import NewTask

FIGURES = ("redis_used_memory_mb", "frontier_process_rss_mb", "claims_per_s")

SOURCES = 50
CLAIMERS = 4


def _tasks(start: int, n: int) -> list[NewTask]:
    out = []
    for i in range(start, start + n):
        src = f"s{i % SOURCES}"
        url = f"http://{src}.example/item/{i}"
        out.append(NewTask(src, url, f"{i:032x}", "item", 5))
    return out


def _claimer(db_url: str, redis_url: str, sources: list[str], direct: bool, seconds: float,
             batch: int, cap: int | None, q: Any) -> None:
    from stratacrawl.cold.ledger import Ledger
    from stratacrawl.cold.pool import make_pool
    from stratacrawl.frontier.frontier import Frontier
    from stratacrawl.hot.queue import HotQueue
    from stratacrawl.settings import Settings

    async def main() -> tuple[list[int], float]:
        import redis.asyncio as aioredis

        got: list[int] = []
        owner = f"c{mp.current_process().pid}"
        async with aioredis.Redis.from_url(redis_url) as r, make_pool(db_url, max_size=2) as pool:
            ledger = Ledger(pool=pool)
            settings = Settings()     # windows sized as a crawl process sizes them
            f = Frontier(ledger=ledger, hot=HotQueue(redis=r, window=settings.hot_window),
                         window_budget=settings.hot_queue_budget)
            t0 = time.monotonic()
            deadline = t0 + seconds
            n = 0
            while time.monotonic() < deadline and (cap is None or len(got) < cap):
                source = sources[(n + hash(owner)) % len(sources)]
                n += 1
                if direct:
                    claimed = await ledger.claim_direct(source, batch, owner, timedelta(minutes=5))
                else:
                    claimed = (await f.claim(source, batch, owner)).tasks
                got += [t.id for t in claimed]
        return got, time.monotonic() - t0

    q.put(uvloop.run(main()))


def claim_round(db_url: str, redis_url: str, sources: list[str], *, direct: bool,
                seconds: float, batch: int = 100, cap: int | None = None) -> tuple[float, int]:
    """Tasks claimed per second by ``CLAIMERS`` processes, each taking batches of ``batch``
    from ``sources`` in turn for ``seconds`` (or until it holds ``cap`` tasks), through the
    hot queues (or, ``direct``, from the ledger alone); and how many ids two claimed."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_claimer,
                         args=(db_url, redis_url, sources, direct, seconds, batch, cap, q))
             for _ in range(CLAIMERS)]
    for p in procs:
        p.start()
    results = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join(30)
    ids = [i for r, _ in results for i in r]
    return len(ids) / max(s for _, s in results), len(ids) - len(set(ids))


async def _fill(rt: Any, total: int) -> tuple[float, float, float]:
    async with bench_components(rt) as c:
        t0 = time.perf_counter()
        for start in range(0, total, 50_000):
            await c.frontier.add(_tasks(start, min(50_000, total - start)))
        enqueue_rate = total / (time.perf_counter() - t0)
        for s in range(SOURCES):  # hot windows full, as in a running crawl
            await c.frontier.refill(f"s{s}", force=True)
        await c.bloom.check_and_add([f"{total:032x}"])  # the filter's bitmap is allocated
        used = float((await c.redis.info("memory"))["used_memory"]) / 2**20
        return enqueue_rate, used, rss_mb()


def run(size: Size = "full") -> Iterator[Figure]:
    total = sized(size, smoke=20_000, quick=500_000, full=5_000_000)
    seconds = sized(size, smoke=1.0, quick=5.0, full=15.0)
    with bench_runtime("frontier") as rt:
        before = float(redis.Redis.from_url(rt.endpoints.redis_url).info("memory")["used_memory"])
        enqueue_rate, used_mb, rss = uvloop.run(_fill(rt, total))
        used_mb -= before / 2**20
        rss_after_fill = rss
        sources = [f"s{i}" for i in range(SOURCES)]
        hot_rate, hot_dups = claim_round(rt.database_url, rt.endpoints.redis_url, sources,
                                         direct=False, seconds=seconds)
        direct_rate, direct_dups = claim_round(rt.database_url, rt.endpoints.redis_url, sources,
                                               direct=True, seconds=seconds)
    sizes = {"queued_tasks": total, "sources": SOURCES}
    yield Figure("frontier", "redis_used_memory_mb", used_mb, "MB", None,
                 "used_memory growth of the Redis server for this frontier",
                 extra={**sizes, "hot_window_per_source": 2000, "bloom_capacity": 10_000_000})
    yield Figure("frontier", "frontier_process_rss_mb", rss_after_fill, "MB", None, None,
                 extra={**sizes, "enqueue_per_s": round(enqueue_rate)})
    yield Figure("frontier", "claims_per_s", hot_rate, "1/s", direct_rate,
                 "4 processes claiming straight from the ledger (FOR UPDATE SKIP LOCKED)",
                 extra={**sizes, "claimers": CLAIMERS, "batch": 100,
                        "double_claims": hot_dups, "baseline_double_claims": direct_dups})
