"""fetch: pages/s fetched and staged end to end; staging rows/s; worker RSS.

``fetch_pages_per_s``: a crawl (seeds → sitemaps and list pages → items, politeness on,
staging with ledger and URL-state updates, lease upkeep, discovery) of 20 simulated sources
of ~30 KB pages served by a separate simulator process: pages staged per second over the
60 s from the 1,000th staged page, with more items than the window can fetch (the figure
of a crawl that has work; start-up and the whole run are reported beside it);
baseline: a plain aiohttp client hammering the same server's pages in the same run.
``staging_rows_per_s``: rows through the staging writer (binary COPY + ledger outcomes +
URL state in one transaction per flush of 1,000 rows — more when rows pile up behind
busy flushes, as they do here —, ``staging_flushes`` at once, then the hot-tier
acknowledgements) against a plain COPY of the same rows into an unindexed table.
``staging_indexed_copy_ratio``: the same rows/s against a binary COPY of the same rows
into a table with staging's own indexes, constraints and day partitions (``LIKE staging
INCLUDING ALL``): what landing pages costs beyond the indexes staging must keep — the
ledger outcomes, URL state and warm outbox in the same transaction, the acknowledgements.
Beside it, the same landing one flush at a time, step by step (the pages' COPY, the
outcomes' COPY, the outcome statement, the commit; ms per 1,000 rows), and the ratio
that one stream could reach with a client that cost nothing (``one_stream_ceiling``).
``fetch_worker_rss_mb``: peak RSS of a ``stratacrawl crawl`` process over a 5-minute crawl
with 1 % of item pages 1-5 MB.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvloop

from bench.figure import Figure, Size, sized
from bench.load import aiohttp_ceiling
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.cold.staging import (
    COLUMNS,
    TYPES,
    StagedFetch,
    copy_encoded_json,
    ensure_partitions,
    land,
    make_row,
)
from stratacrawl.cold.tasks import NewTask, TaskState
from stratacrawl.crawl import CrawlReport, crawl
from stratacrawl.loadtest.processes import ChildProcess
from stratacrawl.process.tuning import tune_crawl_process
from stratacrawl.staging.writer import StagingWriter

FIGURES = ("fetch_pages_per_s", "staging_rows_per_s", "staging_indexed_copy_ratio",
           "fetch_worker_rss_mb")

SOURCES = 20
OVERSIZED_RATE = 0.01   # share of 1-5 MB item pages in the RSS crawl
RSS_SECONDS = 300.0
ROWS_PER_TRANSACTION = 1000
BUSIEST_WINDOW_S = 30.0
WINDOW_S = 60.0          # the steady-state window of fetch_pages_per_s
STARTUP_LIMIT_S = 25.0   # seeding 180,000 tasks from 20 sitemaps takes ~13 s
STARTED_AT_PAGES = 1000  # the window opens at this many staged pages: sitemaps are read


async def _crawl(rt: Any, sources: Any, window_s: float) -> dict[str, float]:
    """Steady-state pages/s: pages staged over ``window_s`` seconds from the
    ``STARTED_AT_PAGES``-th (by then the sitemaps are read and item pages are flowing),
    with a frontier that outlasts the window (the crawl stops after it, before the site
    runs dry); plus start-up (until then) and the whole run, final demotion included."""
    samples: list[tuple[float, int, int]] = []   # (time, pages staged, tasks queued)

    def sample(report: CrawlReport) -> None:
        samples.append((time.monotonic(), report.writer.landed if report.writer else 0,
                        report.discovery.queued))

    tune_crawl_process()  # as `stratacrawl crawl` does
    async with bench_components(rt) as c:
        t0 = time.monotonic()
        report = await crawl(c, sources, until_idle=True, seconds=STARTUP_LIMIT_S + window_s,
                             progress=sample)
        elapsed = time.monotonic() - t0
    landed = report.writer.landed if report.writer else 0
    t_start, n_start = next(((t, n) for t, n, _ in samples if n >= STARTED_AT_PAGES),
                            (t0 + elapsed, landed))
    inside = [(t, n, q) for t, n, q in samples if t_start <= t <= t_start + window_s]
    t_end, n_end, queued = inside[-1] if inside else (t_start, n_start, n_start)
    span = max(t_end - t_start, 1e-9)
    return {"pages_per_s": (n_end - n_start) / span, "window_s": span,
            "pages_in_window": n_end - n_start, "work_left_at_window_end": queued - n_end,
            "startup_s": t_start - t0,
            "pages_staged": landed, "seconds": elapsed, "whole_run_pages_per_s":
            landed / elapsed, "busiest_30s_pages_per_s": _busiest(
                [(t, n) for t, n, _ in samples], BUSIEST_WINDOW_S)}


def _busiest(samples: list[tuple[float, int]], window: float) -> float:
    """Highest pages/s over any ``window`` seconds of (time, pages staged) samples."""
    best, j = 0.0, 0
    for t, n in samples:
        while samples[j][0] < t - window:
            j += 1
        span = t - samples[j][0]
        if span >= window * 0.9:
            best = max(best, (n - samples[j][1]) / span)
    return best


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
        content_hash="0c" * 16, etag=None, last_modified=None, succeeded=True, fetched_at=now,
        status=200, body_bytes=len(body)) for t in tasks[:n]]


async def _leased_fetches(c: Any, source_id: str, n: int, first: int = 0
                          ) -> list[StagedFetch]:
    """``n`` new tasks of ``source_id`` (URL hashes from ``first`` on), leased by "bench",
    as the fetches a worker would hand the staging writer; their day's staging partition
    made and the ledger's statistics taken, as on a live crawl database."""
    tasks = [NewTask(source_id, f"http://{source_id}.example/{i}", f"{first + i:032x}")
             for i in range(n)]
    for i in range(0, n, 50_000):
        await c.frontier.add(tasks[i:i + 50_000])
    claimed = []
    while batch := await c.ledger.claim_direct(source_id, 10_000, "bench", _lease()):
        claimed += batch
    items = _rows(n, claimed)
    async with c.pool.connection() as conn:
        await ensure_partitions(conn, {items[0].fetched_at.date().isoformat()})
    await _analyze(c)
    return items


async def _staging(rt: Any, n: int
                   ) -> tuple[float, float, float, float, dict[str, float]]:
    async with bench_components(rt) as c:
        items = await _leased_fetches(c, "s", n)
        t0 = time.perf_counter()
        async with StagingWriter(pool=c.pool, frontier=c.frontier,
                                 hot_urls=c.hot_urls, spool=c.spool, owner="bench",
                                 flush_rows=ROWS_PER_TRANSACTION,
                                 parallel=rt.settings.staging_flushes) as writer:
            for item in items:
                await writer.add("s", item)
            await writer.flush()
        ours = n / (time.perf_counter() - t0)
        assert writer.stats.landed == n, writer.stats
        per_flush = n / writer.stats.flushes
        day = items[0].fetched_at.date().isoformat()
        async with c.pool.connection() as conn:
            await conn.execute("CREATE TABLE staging_copy (LIKE staging INCLUDING DEFAULTS)")
            await conn.execute("CREATE TABLE staging_indexed (LIKE staging INCLUDING ALL) "
                               "PARTITION BY RANGE (fetched_at)")
            await conn.execute("SELECT sc_ensure_day_partition('staging_indexed', %s)", (day,))
            plain = [await _copy(conn, "staging_copy", items) for _ in range(3)]
            indexed = [await _copy(conn, "staging_indexed", items) for _ in range(3)]
        # each baseline is a fraction of a second: the median of three copies
        steps = await _one_stream(c, n)
        return ours, statistics.median(plain), statistics.median(indexed), per_flush, steps


async def _one_stream(c: Any, n: int) -> dict[str, float]:
    """Seconds per 1,000 rows of each step of landing ``n`` more rows one flush at a time
    (``land`` straight, no writer: no hot-tier acknowledgement, nothing else running):
    the page COPY, the outcomes' COPY, the outcome statement, the commit."""
    items = await _leased_fetches(c, "t", n, first=n)
    steps: dict[str, float] = {"commit": 0.0}
    for k in range(0, n, ROWS_PER_TRANSACTION):
        async with c.pool.connection() as conn:
            async with conn.transaction():
                await land(conn, "bench", items[k:k + ROWS_PER_TRANSACTION],
                           idempotent=False, steps=steps)
                t0 = time.perf_counter()
            steps["commit"] += time.perf_counter() - t0
    return {name: seconds / n * 1000 for name, seconds in steps.items()}


async def _copy(conn: Any, table: str, items: list[StagedFetch]) -> float:
    """Rows/s of one binary COPY of ``items``' rows into an emptied ``table``."""
    await conn.execute(f"TRUNCATE {table}")
    t0 = time.perf_counter()
    async with conn.cursor() as cur:
        copy_encoded_json(cur)
        async with cur.copy(f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN "
                            "(FORMAT BINARY)") as cp:
            cp.set_types(list(TYPES))
            for item in items:
                if item.row is not None:
                    await cp.write_row(item.row)
    return len(items) / (time.perf_counter() - t0)


async def _analyze(c: Any) -> None:
    """Planner statistics as autovacuum would have them on a live crawl database (a bulk
    load just before would leave the planner thinking the tables are empty)."""
    async with c.pool.connection() as conn:
        await conn.execute("ANALYZE tasks")
        await conn.execute("ANALYZE url_state")


def _lease() -> Any:
    from datetime import timedelta

    return timedelta(minutes=10)


def _worker_rss(seconds: float | None, backlog: int, sources: int = SOURCES,
                pages: int | None = None) -> tuple[float, int, float, dict[int, float]]:
    """Peak RSS of a ``stratacrawl crawl`` process (its own OS process, as deployed) over a
    crawl with 1-5 MB pages in the mix, for ``seconds``, or (None) until ``pages`` are
    staged (stopped with SIGTERM then: the simulated sites keep publishing, so a crawl of
    them is never idle for long) or nothing is due;
    (peak MB, pages staged, seconds, peak MB so far at every 100,000 pages staged)."""
    with tempfile.TemporaryDirectory(prefix="bench-fetch-rss-") as tmp:
        folder = Path(tmp)
        with simulated_site(sources, 11, first_host=170, backlog=backlog,
                            oversized_rate=OVERSIZED_RATE, write_to=folder / "sources.yaml"), \
                bench_runtime("fetch") as rt:
            uvloop.run(rt.prepare())
            limit = ["--seconds", f"{seconds:.0f}"] if seconds else ["--until-idle"]
            worker = ChildProcess("fetch-rss", [
                "crawl", "--sources", str(folder / "sources.yaml"), *limit,
                "--worker-id", "bench-rss", "--json"],
                rt.child_env(folder / "state"), folder / "crawl.log")
            t0 = time.monotonic()
            worker.start()
            by_pages: dict[int, float] = {}
            landed = 0
            while worker.alive:
                time.sleep(0.5)
                worker.sample()
                landed = int(worker.latest().get("landed", 0))
                by_pages.setdefault(landed // 100_000 * 100_000, worker.usage.peak_rss_mb)
                if pages and landed >= pages:
                    worker.wait(0)  # SIGTERM now
                    break
            final = worker.final or {}
            return worker.usage.peak_rss_mb, int(final.get("landed", landed)), float(
                final.get("seconds", time.monotonic() - t0)), by_pages


def run(size: Size = "full") -> Iterator[Figure]:
    window = sized(size, smoke=3.0, quick=20.0, full=WINDOW_S)
    # items per source: more than the window can fetch
    backlog = sized(size, smoke=300, quick=3000, full=8000)
    # Throughput on 30 KB pages (the target's static site); no multi-MB pages here.
    with simulated_site(SOURCES, 7, first_host=150, backlog=backlog,
                        oversized_rate=0.0) as (sim, sources):
        with bench_runtime("fetch") as rt:
            fetched = uvloop.run(_crawl(rt, sources, window))
        urls = []
        with httpx.Client() as c:
            for s in sim.sources[:6]:
                urls += [it["url"] for it in c.get(s["url"] + "/_sim/truth").json()["items"][:200]]
        ceiling = aiohttp_ceiling(urls, seconds=sized(size, smoke=1.0, quick=8.0, full=8.0))
    with bench_runtime("staging") as rt:
        rows = sized(size, smoke=2_000, quick=20_000, full=100_000)
        ours, plain, indexed, per_flush, steps = uvloop.run(_staging(rt, rows))
        flushes = rt.settings.staging_flushes
    rss, rss_pages, rss_seconds, _ = _worker_rss(
        sized(size, smoke=4.0, quick=40.0, full=RSS_SECONDS),
        backlog=sized(size, smoke=100, quick=1000, full=20_000))
    rate = fetched.pop("pages_per_s")
    sizes = {"sources": SOURCES, "items_per_source": backlog,
             **{k: round(v, 1) for k, v in fetched.items()}}
    yield Figure("fetch", "fetch_pages_per_s", rate, "1/s", ceiling["per_s"],
                 "plain aiohttp client on the same simulator, same run", extra=sizes)
    yield Figure("fetch", "staging_rows_per_s", ours, "1/s", plain,
                 "plain binary COPY of the same rows (no ledger, no URL state)",
                 extra={"flush_rows": ROWS_PER_TRANSACTION,
                        "rows_per_transaction": round(per_flush),
                        "flushes_at_once": flushes})
    reference_s = 1000 / indexed   # the indexed COPY's seconds per 1,000 rows
    yield Figure("fetch", "staging_indexed_copy_ratio", ours / indexed, "x", None, None,
                 extra={"staging_rows_per_s": round(ours), "indexed_copy_rows_per_s":
                        round(indexed), "unindexed_copy_rows_per_s": round(plain),
                        "reference": "binary COPY of the same rows into a table with staging's "
                                    "own indexes, constraints and day partitions",
                        "one_stream_ms_per_1000_rows": {
                            k: round(v * 1000, 2) for k, v in steps.items()},
                        "indexed_copy_ms_per_1000_rows": round(reference_s * 1000, 2),
                        # the ratio one stream reaches with a free client and no acks
                        "one_stream_ceiling": round(reference_s / sum(steps.values()), 3),
                        "outcomes_vs_reference": round(steps["outcomes"] / reference_s, 2)})
    yield Figure("fetch", "fetch_worker_rss_mb", rss, "MB", None, None,
                 extra={"pages_staged": rss_pages, "seconds": round(rss_seconds, 1),
                        "oversized_rate": OVERSIZED_RATE, "process": "stratacrawl crawl"})
