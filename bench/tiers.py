"""tiers: warm → cold sinking throughput, with lookups answering correctly throughout.

``urls`` crawled URLs are demoted to warm (two documents each: ``url_dedup`` and
``url_meta``; the emulator holds ~7 KB of RAM per document, hence 100k URLs here, not
millions), then a sinking run 40 days later moves them out of warm while a reader looks
URLs up the whole time and compares each answer with the one before sinking.
``demote_docs_per_s`` is the demotion (cold → warm bulk) rate, against a plain bulk
index of the same documents.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import uvloop
from elasticsearch.helpers import async_bulk

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from stratacrawl.cold.url_state import unsynced
from stratacrawl.tiers.demotion import demote
from stratacrawl.tiers.lookup import lookup
from stratacrawl.tiers.sinking import sink_warm
from stratacrawl.urls import fingerprint
from stratacrawl.warm.store import WarmStore
from stratacrawl.wiring import Components

FIGURES = ("sink_docs_per_s", "demote_docs_per_s")


async def _measure(n: int) -> dict[str, float]:
    with bench_runtime("tiers", es_refresh_interval="1s") as rt:
        async with bench_components(rt) as c:
            await c.warm.es.indices.delete(index=f"{rt.layout.prefix}*", ignore_unavailable=True)
            await rt.prepare()
            crawled = datetime.now(UTC) - timedelta(hours=1)
            async with c.pool.connection() as conn, conn.cursor().copy(
                    "COPY url_state (url_hash, source_id, url, last_crawled, http_status, "
                    "content_hash, canonical_url, last_access) FROM STDIN") as copy:
                for i in range(n):
                    url = f"http://s{i % 20}.test/p/{i}"
                    await copy.write_row((fingerprint(url), f"s{i % 20}", url, crawled, 200,
                                          f"{i:032x}", "", crawled))
            async with c.pool.connection() as conn:   # what a fetch queues for demotion
                await conn.execute(
                    "INSERT INTO warm_outbox (url_hashes) SELECT array_agg(url_hash) FROM "
                    "(SELECT url_hash, (row_number() OVER ()) / 1000 AS g FROM url_state) r "
                    "GROUP BY g")
            # baseline: the same documents by a plain bulk index into a scratch prefix
            rows = await unsynced(c.pool, n)
            scratch = rt.layout.__class__(prefix=rt.layout.prefix + "scratch_")
            plain_store = WarmStore(es=c.warm.es, layout=scratch)
            docs = [d for row in rows for d in plain_store.docs(row[1:])]   # (outbox id first)
            t0 = time.monotonic()
            await async_bulk(c.warm.es, docs, chunk_size=2000)
            plain = time.monotonic() - t0
            await c.warm.es.indices.delete(index=f"{scratch.prefix}*", ignore_unavailable=True)
            t0 = time.monotonic()
            demoted = await demote(c.pool, c.warm)
            demote_s = time.monotonic() - t0
            return {"demote_s": demote_s, "plain_s": plain, "docs": demoted.docs,
                    **await _sink_with_reader(c, rows)}


async def _sink_with_reader(c: Components, rows: list[tuple]) -> dict[str, float]:  # type: ignore[type-arg]
    sample = random.Random(7).sample([r[3] for r in rows], 200)   # (outbox id, hash, source, URL, …)
    args: dict[str, Any] = {"hot": c.hot_urls, "warm": c.warm,
                            "pool": c.pool}
    before = {u: (await lookup(u, **args)) for u in sample}
    stop = asyncio.Event()
    checked = wrong = 0

    async def reader() -> None:
        nonlocal checked, wrong
        while not stop.is_set():
            for u in sample:
                got = await lookup(u, **args)
                want = before[u]
                checked += 1
                if got is None or want is None or got.same_facts() != want.same_facts():
                    wrong += 1
                if stop.is_set():
                    return
                await asyncio.sleep(0.05)  # a steady reader, not a second load test

    task = asyncio.create_task(reader())
    t0 = time.monotonic()
    deleted, _ = await sink_warm(c.warm, c.pool,
                                 datetime.now(UTC) + timedelta(days=10))
    seconds = time.monotonic() - t0
    stop.set()
    await task
    return {"sink_s": seconds, "deleted": deleted, "lookups": checked, "wrong": wrong}


def run(size: Size = "full") -> Iterator[Figure]:
    n = sized(size, smoke=2_000, quick=20_000, full=100_000)
    m = uvloop.run(_measure(n))
    yield Figure("tiers", "sink_docs_per_s", m["deleted"] / m["sink_s"], "1/s",
                 extra={"urls": n, "warm_docs": m["deleted"], "lookups_during_sink": m["lookups"],
                        "lookups_wrong": m["wrong"]})
    yield Figure("tiers", "demote_docs_per_s", m["docs"] / m["demote_s"], "1/s",
                 m["docs"] / m["plain_s"], "plain bulk index of the same documents",
                 extra={"urls": n})
