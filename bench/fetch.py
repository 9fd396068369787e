"""fetch: pages/s fetched and staged end to end; staging rows/s; worker RSS.

``fetch_pages_per_s``: a full crawl (seeds → list pages → items, politeness on, staging
with ledger updates) of 20 simulated sources served by a separate simulator process;
baseline: a plain aiohttp client hammering the same server's pages in the same run.
``staging_rows_per_s``: rows through the staging writer (binary COPY + ledger outcomes +
URL state, one transaction per 1,000 rows, ``staging_flushes`` at once, then the hot-tier
acknowledgements) against a plain COPY of the same rows.
``fetch_worker_rss_mb``: peak RSS of this process over the crawl (1-5 MB pages in the mix).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import uvloop

from bench.figure import Figure
from bench.load import aiohttp_ceiling
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.crawl import crawl, spool_for
from stratacrawl.frontier.tasks import NewTask, TaskState
from stratacrawl.staging.rows import COLUMNS, TYPES, StagedFetch, ensure_partitions, make_row
from stratacrawl.staging.writer import StagingWriter

SOURCES = 20
ROWS_PER_TRANSACTION = 1000


async def _crawl(rt: Any, sources: Any, seconds: float) -> tuple[float, int, float]:
    async with bench_components(rt) as c:
        t0 = time.monotonic()
        report = await crawl(c, sources, until_idle=True, seconds=seconds)
        elapsed = time.monotonic() - t0
        landed = report.writer.landed if report.writer else 0
        return landed / elapsed, landed, elapsed


def _rows(n: int, tasks: list[Any]) -> list[StagedFetch]:
    now = datetime.now(UTC)
    body = b"<html><body>" + b"<p>some text of a page</p>" * 40 + b"</body></html>"
    return [StagedFetch(
        row=make_row(fetched_at=now, fetch_key=f"{t.id}:1:bench", source_id=t.source_id,
                     task_id=t.id, attempt=1, url=t.url, final_url=t.url, status=200,
                     headers={"content-type": "text/html"}, content_type="text/html",
                     body=body, elapsed_ms=1.0, trace_id="bench", worker="bench", kind="item",
                     success=True),
        outcome=(t.id, TaskState.SUCCEEDED, 200, None, None), url_hash=t.url_hash,
        content_hash="h", etag=None, last_modified=None, succeeded=True, fetched_at=now,
        status=200, body_bytes=len(body)) for t in tasks[:n]]


async def _staging(rt: Any, n: int) -> tuple[float, float]:
    async with bench_components(rt) as c:
        tasks = [NewTask("s", f"http://s.example/{i}", f"{i:032x}") for i in range(n)]
        for i in range(0, n, 50_000):
            await c.frontier.add(tasks[i:i + 50_000])
        claimed = []
        while batch := await c.ledger.claim_direct("s", 10_000, "bench", _lease()):
            claimed += batch
        items = _rows(n, claimed)
        async with c.pool.connection() as conn:
            await ensure_partitions(conn, {items[0].fetched_at.date().isoformat()})
        await _analyze(c)
        t0 = time.perf_counter()
        async with StagingWriter(pool=c.pool, ledger=c.ledger, hot_queue=c.hot_queue,
                                 hot_urls=c.hot_urls, spool=spool_for(c), owner="bench",
                                 flush_rows=ROWS_PER_TRANSACTION,
                                 parallel=rt.settings.staging_flushes) as writer:
            for item in items:
                await writer.add("s", item)
            await writer.flush()
        ours = n / (time.perf_counter() - t0)
        assert writer.stats.landed == n, writer.stats
        async with c.pool.connection() as conn:
            await conn.execute("CREATE TABLE staging_copy (LIKE staging INCLUDING DEFAULTS)")
            t0 = time.perf_counter()
            async with conn.cursor() as cur, cur.copy(
                    f"COPY staging_copy ({', '.join(COLUMNS)}) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(list(TYPES))
                for item in items:
                    if item.row is not None:
                        await cp.write_row(item.row)
            plain = n / (time.perf_counter() - t0)
        return ours, plain


async def _analyze(c: Any) -> None:
    """Planner statistics as autovacuum would have them on a live crawl database (a bulk
    load just before would leave the planner thinking the tables are empty)."""
    async with c.pool.connection() as conn:
        await conn.execute("ANALYZE tasks")
        await conn.execute("ANALYZE url_state")


def _lease() -> Any:
    from datetime import timedelta

    return timedelta(minutes=10)


def run(quick: bool = False) -> Iterator[Figure]:
    seconds = 30.0 if quick else 120.0
    backlog = 300 if quick else 3000
    with simulated_site(SOURCES, 7, first_host=150, backlog=backlog) as (sim, sources):
        with bench_runtime("fetch") as rt:
            rate, landed, elapsed = uvloop.run(_crawl(rt, sources, seconds))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        urls = []
        with httpx.Client() as c:
            for s in sim.sources[:6]:
                urls += [it["url"] for it in c.get(s["url"] + "/_sim/truth").json()["items"][:200]]
        ceiling = aiohttp_ceiling(urls, seconds=8.0)
    with bench_runtime("staging") as rt:
        ours, plain = uvloop.run(_staging(rt, 20_000 if quick else 100_000))
        flushes = rt.settings.staging_flushes
    sizes = {"sources": SOURCES, "items_per_source": backlog, "pages_staged": landed,
             "seconds": round(elapsed, 1)}
    yield Figure("fetch", "fetch_pages_per_s", rate, "1/s", ceiling["per_s"],
                 "plain aiohttp client on the same simulator, same run", extra=sizes)
    yield Figure("fetch", "staging_rows_per_s", ours, "1/s", plain,
                 "plain binary COPY of the same rows (no ledger, no URL state)",
                 extra={"rows_per_transaction": ROWS_PER_TRANSACTION,
                        "flushes_at_once": flushes})
    yield Figure("fetch", "fetch_worker_rss_mb", rss, "MB", None, None, extra=sizes)
