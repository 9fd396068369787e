"""recovery: Redis loses everything under a big frontier; how fast does work resume, and
how long until hot is whole again (Bloom filter included)?

Cold holds ``known`` URLs (url_state) and ``queued`` ready tasks over 50 sources (made
in the database with generate_series). The filter is built once, then Redis is flushed
and the recovery flow's steps run: ``recovery_resume_s`` is the time until the ready
queues are rebuilt and a claim succeeds; ``recovery_full_s`` until every step is done.
Baseline of the full figure: streaming the same fingerprints out of PostgreSQL alone
(the floor any rebuild from cold pays).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from stratacrawl.cold.url_state import ALL_FINGERPRINTS_RAW
from stratacrawl.tiers.recovery import BLOOM_CHUNK
from stratacrawl.wiring import Components

FIGURES = ("recovery_resume_s", "recovery_full_s")

SOURCES = 50


async def _populate(c: Components, known: int, queued: int) -> None:
    async with c.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO url_state (url_hash, source_id, url, last_crawled) "
            "SELECT md5(i::text)::uuid, 's' || (i %% %(s)s), 'http://s' || (i %% %(s)s) || '.test/p/' || i, "
            "CASE WHEN i > %(q)s THEN now() - interval '1 day' END "
            "FROM generate_series(1, %(n)s) AS i", {"n": known, "q": queued, "s": SOURCES})
        await conn.execute(
            "INSERT INTO tasks (source_id, url, url_hash, kind, due_at) "
            "SELECT 's' || (i %% %(s)s), 'http://s' || (i %% %(s)s) || '.test/p/' || i, md5(i::text)::uuid, "
            "'item', now() - interval '1 minute' FROM generate_series(1, %(q)s) AS i",
            {"q": queued, "s": SOURCES})
        await conn.execute(   # each task's identity, as the ledger's enqueue writes it
            "INSERT INTO task_keys (source_id, url_hash, task_id) "
            "SELECT source_id, url_hash, id FROM tasks")
        for table in ("url_state", "tasks", "task_keys"):
            await conn.execute(f"ANALYZE {table}")
        # Cold says none of these URLs was synced to warm (warm_synced_at stays NULL), which
        # is what warm holds: recovery finds no week short and re-indexes nothing (not what
        # is timed here; marking them synced made it re-index all of them into warm).


async def stream_fingerprints_s(c: Components) -> float:
    """Seconds to stream every URL fingerprint out of PostgreSQL: the floor any rebuild of
    the Bloom filter from cold pays."""
    t0 = time.monotonic()
    async with (c.pool.connection() as conn, conn.transaction(),
                conn.cursor(name="floor", binary=True) as cur):
        await cur.execute(ALL_FINGERPRINTS_RAW)
        while await cur.fetchmany(BLOOM_CHUNK):
            pass
    return time.monotonic() - t0


async def _measure(known: int, queued: int) -> dict[str, float]:
    with bench_runtime("recovery", bloom_capacity=max(known, 1_000_000)) as rt:
        async with bench_components(rt) as c:
            t0 = time.monotonic()
            await _populate(c, known, queued)
            populate_s = time.monotonic() - t0
            await c.warm.es.index(index=rt.layout.index("url_dedup", datetime.now(UTC)),
                             id="marker", document={"url_hash": "marker"}, refresh=True)
            await c.recovery().run()                          # the filter as it was before the loss
            used_mb = (await c.redis.info("memory"))["used_memory"] / 1e6
            await c.redis.flushdb()                   # Redis loses everything
            t0 = time.monotonic()
            report = await c.recovery().run()
            full = time.monotonic() - t0
            t1 = time.monotonic()
            batch = await c.frontier.claim("s1", 10, "bench")
            claim_s = time.monotonic() - t1
            floor = await stream_fingerprints_s(c)
            steps = {s.name: round(s.seconds, 2) for s in report.steps}
            return {"resume": report.resumed_after_s + claim_s, "full": full, "floor": floor,
                    "claimed": len(batch.tasks), "populate_s": populate_s,
                    "redis_mb_before": used_mb, **steps}


def run(size: Size = "full") -> Iterator[Figure]:
    known, queued = sized(size, smoke=(20_000, 10_000), quick=(1_000_000, 500_000),
                          full=(10_000_000, 5_000_000))
    m = uvloop.run(_measure(known, queued))
    sizes = {"known_urls": known, "queued_tasks": queued, "sources": SOURCES}
    steps = {k: v for k, v in m.items() if k not in ("resume", "full", "floor")}
    yield Figure("recovery", "recovery_resume_s", m["resume"], "s",
                 extra={**sizes, "claimed_after_resume": m["claimed"]})
    yield Figure("recovery", "recovery_full_s", m["full"], "s", m["floor"],
                 "streaming the same fingerprints out of PostgreSQL alone",
                 extra={**sizes, "steps": steps})
