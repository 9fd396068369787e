"""dedup: checks/s for batches of new URLs, single-check p99 at 10 M known URLs, Bloom memory.

Baseline (same run, same Redis): scrapy-redis' approach, a Redis SET of SHA1
fingerprints (``SADD`` per URL, pipelined in the same batches).
At 10 M known URLs the Bloom filter and PostgreSQL hold all of them; the warm
emulator holds a sample (see ``warm_docs``) — it holds ~7 KB of RAM per document.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import numpy as np
import redis.asyncio as aioredis
import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from stratacrawl.wiring import Components

FIGURES = ("dedup_checks_per_s", "dedup_p99_ms", "bloom_bytes_per_url")

BATCH = 10_000


def fps(start: int, n: int, tag: str = "u") -> list[str]:
    return [hashlib.blake2b(f"{tag}{i}".encode(), digest_size=16).hexdigest()
            for i in range(start, start + n)]


async def _load_known(c: Components, known: int) -> None:
    """``known`` URLs into the Bloom filter and into url_state (COPY), as after a long crawl."""
    for start in range(0, known, 100_000):
        chunk = fps(start, min(100_000, known - start), "k")
        await c.bloom.check_and_add(chunk)
        async with c.pool.connection() as conn:
            async with conn.cursor() as cur:
                async with cur.copy("COPY url_state (url_hash, source_id, url, last_crawled) "
                                    "FROM STDIN") as copy:
                    for fp in chunk:
                        await copy.write_row((fp, "bench", f"http://b/{fp}", "2026-11-29"))
            await conn.commit()


async def _warm_sample(c: Components, n: int) -> None:
    from datetime import UTC, datetime

    index = c.runtime.layout.index("url_dedup", datetime.now(UTC))
    for start in range(0, n, 5000):
        ops: list[dict[str, object]] = []
        for fp in fps(start, min(5000, n - start), "k"):
            ops += [{"index": {"_index": index, "_id": fp}},
                    {"url_hash": fp, "last_crawled": "2026-11-29T00:00:00Z"}]
        await c.warm.es.bulk(operations=ops)


async def scrapy_redis_sadd(redis: aioredis.Redis, n: int) -> tuple[float, float]:
    key = "bench:scrapy_redis:dupefilter"
    await redis.delete(key)
    sha1 = [hashlib.sha1(f"b{i}".encode()).hexdigest() for i in range(n)]
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        async with redis.pipeline(transaction=False) as pipe:
            for fp in sha1[start:start + BATCH]:
                pipe.sadd(key, fp)
            await pipe.execute()
    rate = n / (time.perf_counter() - t0)
    per_url = float(await redis.memory_usage(key, samples=0) or 0) / n
    await redis.delete(key)
    return rate, per_url


async def _main(known: int, new: int, warm_docs: int) -> list[Figure]:
    with bench_runtime("dedup", bloom_capacity=max(known, 1_000_000)) as rt:
        async with bench_components(rt) as c:
            await _load_known(c, known)
            await _warm_sample(c, warm_docs)
            c.dedup.cache_ttl_s = 0
            fresh = fps(0, new, "n")
            t0 = time.perf_counter()
            for start in range(0, new, BATCH):
                await c.dedup.check(fresh[start:start + BATCH])
            checks_per_s = new / (time.perf_counter() - t0)
            # Single checks: half known (exact check through the tiers), half new.
            singles = [*fps(0, 500, "k"), *fps(10_000, 500, "k"), *fps(10**8, 1000, "s")]
            np.random.default_rng(7).shuffle(singles)
            lat = []
            for fp in singles:
                t = time.perf_counter()
                await c.dedup.check([fp])
                lat.append((time.perf_counter() - t) * 1000)
            p99 = float(np.percentile(lat, 99))
            bloom_bytes = await c.bloom.used_bytes()
            base_rate, base_bytes = await scrapy_redis_sadd(c.redis, min(new, 1_000_000))
            base_lat = []
            for i in range(2000):
                t = time.perf_counter()
                await c.redis.sismember("bench:scrapy_redis:dupefilter", f"x{i}")
                base_lat.append((time.perf_counter() - t) * 1000)
    sizes = {"known_urls": known, "new_urls": new, "warm_docs": warm_docs}
    return [
        Figure("dedup", "dedup_checks_per_s", checks_per_s, "1/s", base_rate,
               "redis SADD of sha1 (scrapy-redis), pipelined", extra=sizes),
        Figure("dedup", "dedup_p99_ms", p99, "ms", float(np.percentile(base_lat, 99)),
               "redis SISMEMBER of sha1, single", extra=sizes),
        Figure("dedup", "bloom_bytes_per_url", bloom_bytes / max(known, 1_000_000), "B",
               base_bytes, "redis SET of sha1, bytes per member",
               extra={**sizes, "target_fp_rate": 0.001}),
    ]


def run(size: Size = "full") -> Iterator[Figure]:
    known, new, warm = sized(size, smoke=(20_000, 20_000, 2_000),
                             quick=(1_000_000, 200_000, 20_000),
                             full=(10_000_000, 1_000_000, 200_000))
    yield from uvloop.run(_main(known, new, warm))
