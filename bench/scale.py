"""scale: the tiered memory at 1 %, 10 % and 100 % of a big frontier (default 100 M known
URLs, 20 M queued, 10,000 sources; ``--quick`` 10 M / 2 M / 1,000).

The frontier is built the fast way and grown in three steps: realistic URLs (hosts,
paths and query shapes drawn from a seeded generator, already canonical) are COPYed into
``url_state`` and, for the queued share, ``tasks`` with their indexes dropped and built
again after; the Bloom filter is filled through its own batch path; warm holds a sample
of the last week (the Elasticsearch-API server here keeps ~7 KB of RAM per document, so
the sample is bounded: ``warm_urls``). At each step the real code paths run on top:

- ``redis_used_memory_mb`` / ``redis_bytes_per_known_url``: Redis after a recovery
  rebuilt hot from cold (Bloom filter, every source's ready window), against scrapy-redis'
  SET of SHA-1 fingerprints (bytes per member measured in the same run);
- ``crawler_rss_mb``: peak RSS of a real ``stratacrawl crawl`` of a simulated site whose
  URLs are partly known to the big frontier (crawled long ago: due again);
- ``dedup_checks_per_s`` (batches of 10,000, half known, half new), ``dedup_p99_ms``
  (single checks, same mix), ``claims_per_s`` (4 claimer processes through the hot
  queues), ``discovery_urls_per_s`` (a list page's 200 links through canonicalization,
  URL rules and dedup);
- ``recovery_resume_s`` and ``recovery_full_s`` after Redis lost everything, against
  streaming the fingerprints out of PostgreSQL alone;
- ``cold_bytes_per_known_url``: ``url_state``, ``tasks`` and ``task_keys``, tables,
  indexes and TOAST.

At the last step also ``sink_docs_per_s`` (warm → cold on the week's sample) and
``bench_build_s``. Each figure carries its value at every step (``by_step``); where the
issue of growth is the point (dedup, claims) the baseline is the figure at the first step.
"""

from __future__ import annotations

import asyncio
import functools
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
import uvloop

from bench.dedup import fps, scrapy_redis_sadd
from bench.figure import Figure, Size, sized
from bench.frontier import claim_round
from bench.recovery import stream_fingerprints_s
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.loadtest.processes import ChildProcess
from stratacrawl.sources import Source, parse_sources
from stratacrawl.tiers.demotion import demote
from stratacrawl.tiers.sinking import sink_warm
from stratacrawl.urls import canonical_fingerprint
from stratacrawl.wiring import Components, Runtime

FIGURES = ("redis_used_memory_mb", "redis_bytes_per_known_url", "crawler_rss_mb",
           "dedup_checks_per_s", "dedup_p99_ms", "claims_per_s", "discovery_urls_per_s",
           "recovery_resume_s", "recovery_full_s", "cold_bytes_per_known_url",
           "sink_docs_per_s", "bench_build_s")

STEPS = (0.01, 0.1, 1.0)
CHUNK = 200_000
SEED = 20261203
DEDUP_BATCH = 10_000
# Shares of the generated URLs: how long ago a crawled one was last fetched is spread
# over this many hours (60 days: some within the 7-day dedup window, most before it).
HOURS_BACK = 60 * 24

# ---------------------------------------------------------------- the URL generator

WORDS = ("harbor", "maple", "orbit", "cedar", "delta", "ember", "falcon", "garnet", "helix",
         "indigo", "juniper", "kestrel", "lumen", "mosaic", "nimbus", "opal", "prism",
         "quartz", "raven", "sierra", "tundra", "umber", "vertex", "willow", "xenon",
         "yarrow", "zephyr", "amber", "basalt", "cobalt", "dune", "echo")
TLDS = ("com", "net", "org", "io", "de", "fr", "co.uk", "jp")
COLORS = ("black", "blue", "green", "red", "white")
SIZES = ("l", "m", "s", "xl")
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(i: np.ndarray) -> np.ndarray:
    """splitmix64 of each index: the generator's randomness, a pure function of the index."""
    with np.errstate(over="ignore"):
        z = i.astype(np.uint64) + np.uint64(SEED) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def host(source: int) -> str:
    w = len(WORDS)
    return (f"www.{WORDS[source % w]}{WORDS[source // w % w]}{source // (w * w) or ''}"
            f".{TLDS[source % len(TLDS)]}")


def source_id(source: int) -> str:
    return f"src{source:05d}"


@dataclass(frozen=True)
class Generated:
    """URLs ``start .. start + n`` of the frontier, in parallel lists."""

    urls: list[str]
    sources: np.ndarray      # source number per URL
    hours_ago: np.ndarray    # when it was last crawled, hours ago (queued ones: never)
    queued: np.ndarray       # bool: waiting in the ledger, never crawled

    @property
    def fingerprints(self) -> list[str]:
        return [canonical_fingerprint(u) for u in self.urls]


@functools.cache
def _hosts(sources: int) -> tuple[str, ...]:
    return tuple(host(s) for s in range(sources))


def generate(start: int, n: int, *, sources: int, queued_share: float) -> Generated:
    """URLs ``start .. start + n`` of the frontier (see ``generate_at``)."""
    return generate_at(np.arange(start, start + n, dtype=np.uint64), sources=sources,
                       queued_share=queued_share)


def generate_at(indices: np.ndarray, *, sources: int, queued_share: float) -> Generated:
    """A deterministic set of the frontier's URLs: URL ``i`` is the same in every call. Six
    shapes (articles by date and slug, products with sorted query parameters, paged
    categories, plain pages, searches, blog posts), each carrying ``i`` so every URL is
    distinct, on ``sources`` hosts; all already canonical."""
    h = _mix(indices)
    src = (h % np.uint64(sources)).astype(np.int64)
    shape = ((h >> np.uint64(16)) % np.uint64(6)).astype(np.int64).tolist()
    a = ((h >> np.uint64(20)) % np.uint64(len(WORDS))).astype(np.int64).tolist()
    b = ((h >> np.uint64(26)) % np.uint64(len(WORDS))).astype(np.int64).tolist()
    num = ((h >> np.uint64(32)) % np.uint64(400) + np.uint64(1)).astype(np.int64).tolist()
    month = ((h >> np.uint64(41)) % np.uint64(96)).astype(np.int64).tolist()
    hours = ((h >> np.uint64(48)) % np.uint64(HOURS_BACK)).astype(np.int64)
    queued = ((h >> np.uint64(8)) % np.uint64(1_000_000)).astype(np.int64) < int(
        queued_share * 1_000_000)
    hosts = _hosts(sources)
    out = []
    for i, s, sh, x, y, m, j in zip(indices.tolist(), src.tolist(), shape, a, b, num, month,
                                    strict=True):
        base = f"https://{hosts[s]}"
        wx, wy = WORDS[x], WORDS[y]
        if sh == 0:
            url = f"{base}/news/{2019 + j // 12}/{j % 12 + 1:02d}/{wx}-{wy}-{i}"
        elif sh == 1:
            url = f"{base}/product/{i}?color={COLORS[x % 5]}&size={SIZES[y % 4]}"
        elif sh == 2:
            url = f"{base}/category/{wx}/{i}?page={m}"
        elif sh == 3:
            url = f"{base}/p/{i}.html"
        elif sh == 4:
            url = f"{base}/search?page={m}&q={wx}+{wy}&ref={i}"
        else:
            url = f"{base}/blog/{wx}-{wy}/{i}/"
        out.append(url)
    return Generated(out, src, hours, queued)


# ---------------------------------------------------------------- building the frontier

@dataclass
class Built:
    known: int = 0
    queued: int = 0
    seconds: float = 0.0
    indexes: dict[str, list[str]] = field(default_factory=dict)


async def _drop_indexes(c: Components, built: Built) -> None:
    """Every index of url_state and tasks but their primary keys is dropped for the
    COPY (and remembered); the primary keys stay: their constraints are the schema's."""
    async with c.pool.connection() as conn:
        for table in ("url_state", "tasks"):
            rows = await (await conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
                "AND indexname NOT LIKE '%%_pkey'", (table,))).fetchall()
            built.indexes.setdefault(table, [])
            for name, definition in rows:
                built.indexes[table].append(definition)
                await conn.execute(f'DROP INDEX "{name}"')


async def _restore_indexes(c: Components, built: Built) -> None:
    async with c.pool.connection() as conn:
        await conn.execute("SET maintenance_work_mem = '1GB'")
        for table, definitions in built.indexes.items():
            for definition in definitions:
                await conn.execute(definition)
            await conn.execute(f"ANALYZE {table}")
    built.indexes.clear()


def _canonical(url: str) -> str:
    """The page's declared rel=canonical, as a fetch stores it: most pages name themselves
    (stored as ''), a product page names its URL without the variant query."""
    return url.split("?", 1)[0] if "/product/" in url else ""


def _stamps(now: datetime) -> list[str]:
    return [(now - timedelta(hours=h)).isoformat() for h in range(HOURS_BACK)]


async def grow(c: Components, built: Built, to: int, *, queued_share: float,
               sources: int) -> None:
    """URLs ``built.known .. to`` into cold (COPY) and the Bloom filter."""
    t0 = time.monotonic()
    await _drop_indexes(c, built)
    stamps = _stamps(datetime.now(UTC))
    due = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    for start in range(built.known, to, CHUNK):
        g = generate(start, min(CHUNK, to - start), sources=sources,
                     queued_share=queued_share)
        fps = g.fingerprints
        state, tasks = [], []
        for url, fp, s, hours, q in zip(g.urls, fps, g.sources.tolist(), g.hours_ago.tolist(),
                                        g.queued.tolist(), strict=True):
            sid = source_id(s)
            if q:
                state.append(f"{fp}\t{sid}\t{url}\t\\N\t{due}\t\\N\t\\N\t\\N\t\\N\n")
                tasks.append(f"{sid}\t{url}\t{fp}\titem\t{due}\n")
            else:
                state.append(f"{fp}\t{sid}\t{url}\t{stamps[hours]}\t{stamps[hours]}\t200\t"
                             f"{fp[::-1]}\t{20_000 + hours * 7}\t{_canonical(url)}\n")
        async with c.pool.connection() as conn:
            async with conn.cursor().copy(
                    "COPY url_state (url_hash, source_id, url, last_crawled, last_access, "
                    "http_status, content_hash, content_length, canonical_url) FROM STDIN"
                    ) as copy:
                await copy.write("".join(state).encode())
            row = await (await conn.execute("SELECT COALESCE(max(id), 0) FROM tasks")).fetchone()
            async with conn.cursor().copy("COPY tasks (source_id, url, url_hash, kind, due_at) "
                                          "FROM STDIN") as copy:
                await copy.write("".join(tasks).encode())
            # A task's identity, as the ledger's enqueue writes it (its own table).
            await conn.execute("INSERT INTO task_keys (source_id, url_hash, task_id) SELECT "
                               "source_id, url_hash, id FROM tasks WHERE id > %s",
                               (row[0] if row else 0,))
        built.queued += len(tasks)
        await c.bloom.check_and_add(fps)
    await _restore_indexes(c, built)
    built.known = to
    built.seconds += time.monotonic() - t0


async def _warm_sample(c: Components, urls: int) -> int:
    """Up to ``urls`` URLs crawled in the last week into warm, through the demotion path
    (the warm outbox, as a fetch queues them), so cold marks exactly those synced."""
    async with c.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO warm_outbox (url_hashes) SELECT array_agg(url_hash) FROM "
            "(SELECT url_hash, (row_number() OVER ()) / 1000 AS g FROM url_state "
            " WHERE last_crawled > now() - interval '7 days' LIMIT %s) r GROUP BY g", (urls,))
    return (await demote(c.pool, c.warm)).rows


# ---------------------------------------------------------------- measuring one step

def _known_sample(rng: random.Random, known: int, n: int, sources: int) -> list[str]:
    picked = np.array(rng.choices(range(known), k=n), dtype=np.uint64)
    return generate_at(picked, sources=sources, queued_share=0).fingerprints


async def _dedup(c: Components, known: int, sources: int, checks: int, singles: int,
                 step: int) -> tuple[float, float]:
    rng = random.Random(step)
    c.dedup.cache_ttl_s = 0
    batches = []
    for b in range(0, checks, DEDUP_BATCH):
        half = min(DEDUP_BATCH, checks - b) // 2
        mixed = _known_sample(rng, known, half, sources) + fps(0, half, f"n{step}-{b}-")
        rng.shuffle(mixed)
        batches.append(mixed)
    t0 = time.perf_counter()
    for batch in batches:
        await c.dedup.check(batch)
    rate = sum(map(len, batches)) / (time.perf_counter() - t0)
    mixed = _known_sample(rng, known, singles // 2, sources) + fps(0, singles // 2, f"s{step}-")
    rng.shuffle(mixed)
    lat = []
    for fp in mixed:
        t = time.perf_counter()
        await c.dedup.check([fp])
        lat.append((time.perf_counter() - t) * 1000)
    return rate, float(np.percentile(lat, 99))


def _bench_source(number: int) -> Source:
    return parse_sources({"sources": [{
        "id": source_id(number), "seeds": [f"https://{host(number)}/"],
        "allow_private_networks": True}]}).sources[0]


async def _discovery(c: Components, known: int, sources: int, pages: int, step: int
                     ) -> float:
    """A list page's 200 links (half known to the frontier, half new) per call."""
    rng = random.Random(1000 + step)
    src = rng.randrange(sources)
    source = _bench_source(src)
    g = generate(0, min(known, 200_000), sources=sources, queued_share=0)
    own = [u for u, s in zip(g.urls, g.sources.tolist(), strict=True) if s == src] or g.urls
    lists = []
    for p in range(pages):
        new = [f"https://{host(src)}/new/{step}/{p}/{k}" for k in range(100)]
        lists.append([rng.choice(own) for _ in range(100)] + new)
    t0 = time.perf_counter()
    for p, links in enumerate(lists):
        await c.discovery.discover(source, f"https://{host(src)}/list/{p}", links)
    return pages * 200 / (time.perf_counter() - t0)


async def _recovery(c: Components) -> dict[str, Any]:
    """Redis loses everything; the recovery flow's steps run while a fetch worker keeps
    claiming (as crawls do): ``resume`` is when its first claim after the loss succeeds,
    ``queues`` when recovery has every source's window back, ``full`` when it is done."""
    async with c.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT source_id FROM tasks WHERE state = 'PENDING' AND source_id LIKE 'src%%' "
            "LIMIT 1")).fetchone()
    await c.redis.flushdb()
    t0 = time.monotonic()
    recovery = asyncio.create_task(c.recovery().run())
    resume = 0.0
    while row and not resume:
        batch = await c.frontier.claim(row[0], 10, "bench-scale")
        if batch.tasks:
            resume = time.monotonic() - t0
            await c.frontier.delay(batch, "bench-scale", timedelta(0))   # given back
        else:
            await asyncio.sleep(0.01)
    report = await recovery
    full = time.monotonic() - t0
    floor = await stream_fingerprints_s(c)
    return {"resume": resume, "queues": report.resumed_after_s, "full": full, "floor": floor,
            "steps": {s.name: round(s.seconds, 2) for s in report.steps}}


async def _cold_bytes(c: Components) -> int:
    async with c.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT pg_total_relation_size('url_state') + pg_total_relation_size('tasks') "
            "+ pg_total_relation_size('task_keys')"
            )).fetchone()
    return int(row[0]) if row else 0


async def _mark_site_known(c: Components, urls: list[str]) -> None:
    """Half the simulated site's item URLs known to cold, crawled 30 days ago."""
    rows = [(canonical_fingerprint(u), "sim-known", u) for u in urls[::2]]
    async with c.pool.connection() as conn, conn.cursor().copy(
            "COPY url_state (url_hash, source_id, url, last_crawled) FROM STDIN") as copy:
        for fp, sid, url in rows:
            await copy.write_row((fp, sid, url, datetime.now(UTC) - timedelta(days=30)))
    await c.bloom.check_and_add([fp for fp, _, _ in rows])


def _crawler_rss(rt: Runtime, backlog: int, step: int) -> tuple[float, int, float]:
    """Peak RSS of a ``stratacrawl crawl`` of 2 simulated sources, until idle; pages it
    staged; PostgreSQL WAL written meanwhile per page staged (the crawl's transactions,
    page bodies included, plus whatever else ran: nothing else does here)."""
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folder = Path(tmp)
        with simulated_site(2, 30 + step, first_host=190 + step, backlog=backlog,
                            oversized_rate=0.0, epoch=datetime.now(UTC).isoformat(),
                            write_to=folder / "sources.yaml") as (sim, _):
            urls: list[str] = []
            with httpx.Client() as http:
                for s in sim.sources:
                    urls += [it["url"] for it in http.get(s["url"] + "/_sim/truth").json()["items"]]

            async def mark() -> None:
                async with bench_components(rt) as c:
                    await _mark_site_known(c, urls)

            uvloop.run(mark())
            worker = ChildProcess("scale-crawl", [
                "crawl", "--sources", str(folder / "sources.yaml"), "--until-idle",
                "--worker-id", f"bench-scale-{step}", "--json"],
                rt.child_env(folder / "state"), folder / "crawl.log")
            with psycopg.connect(rt.database_url, autocommit=True) as db:
                start_lsn = db.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
                worker.start()
                while worker.alive:
                    time.sleep(0.5)
                    worker.sample()
                wal = db.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)",
                                 (start_lsn,)).fetchone()[0]  # type: ignore[index]
            final = worker.final or {}
            landed = int(final.get("landed", 0))
            return worker.usage.peak_rss_mb, landed, float(wal) / max(landed, 1)


@dataclass(frozen=True)
class Plan:
    size: Size
    known: int
    queued: int
    sources: int
    warm_urls: int
    dedup_checks: int
    singles: int
    discovery_pages: int
    claim_seconds: float
    site_backlog: int


async def _measure_step(rt: Runtime, plan: Plan, built: Built, step: int, to: int,
                        base_used: float) -> dict[str, Any]:
    async with bench_components(rt) as c:
        await grow(c, built, to, queued_share=plan.queued / plan.known, sources=plan.sources)
        if step == len(STEPS) - 1:
            await _warm_sample(c, plan.warm_urls)
        m: dict[str, Any] = {"known": built.known, "queued": built.queued,
                             "cold_bytes": await _cold_bytes(c)}
        m["dedup_rate"], m["dedup_p99"] = await _dedup(c, built.known, plan.sources,
                                                       plan.dedup_checks, plan.singles, step)
        m["discovery_rate"] = await _discovery(c, built.known, plan.sources,
                                               plan.discovery_pages, step)
        rec = await _recovery(c)
        m.update(recovery_resume=rec["resume"], recovery_queues=rec["queues"],
                 recovery_full=rec["full"],
                 recovery_floor=rec["floor"], recovery_steps=rec["steps"])
        info = await c.redis.info("memory")
        m["redis_mb"] = (float(info["used_memory"]) - base_used) / 2**20
        m["bloom_mb"] = await c.bloom.used_bytes() / 2**20
    return m


async def _sink(rt: Runtime) -> tuple[int, float]:
    async with bench_components(rt) as c:
        t0 = time.monotonic()
        deleted, _ = await sink_warm(c.warm, c.pool, datetime.now(UTC) + timedelta(days=10))
        return deleted, time.monotonic() - t0


def measure(plan: Plan) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every step's figures, and the whole run's (sinking, build time, baselines)."""
    capacity = max(plan.known, 1_000_000)
    # Each size its own database and Redis DB: a quick look must not wipe a full run.
    name = "scale" if plan.size == "full" else f"scale_{plan.size}"
    with bench_runtime(name, bloom_capacity=capacity, es_refresh_interval="1s") as rt:
        import redis

        base_used = float(redis.Redis.from_url(rt.endpoints.redis_url).info("memory")["used_memory"])
        built = Built()
        steps = []
        sources = [source_id(s) for s in range(plan.sources)]
        for step, share in enumerate(STEPS):
            m = uvloop.run(_measure_step(rt, plan, built, step,
                                         max(1, round(plan.known * share)), base_used))
            # A first round right after the build and the recovery reads the ledger's
            # pages from disk; the figure is the second, with the pages a running crawl
            # would have in memory (both reported).
            rounds = [claim_round(rt.database_url, rt.endpoints.redis_url, sources,
                                  direct=False, seconds=plan.claim_seconds, batch=20,
                                  cap=max(100, built.queued // 16)) for _ in range(2)]
            m["claims"], m["claims_first_round"] = rounds[1][0], rounds[0][0]
            m["double_claims"] = rounds[0][1] + rounds[1][1]
            m["crawler_rss"], m["crawler_landed"], m["wal_per_page"] = _crawler_rss(
                rt, plan.site_backlog, step)
            steps.append(m)

        async def tail() -> dict[str, Any]:
            async with bench_components(rt) as c:
                _, per_member = await scrapy_redis_sadd(c.redis, 100_000)
            deleted, seconds = await _sink(rt)
            return {"scrapy_redis_bytes": per_member, "sunk": deleted, "sink_s": seconds,
                    "build_s": built.seconds}

        return steps, uvloop.run(tail())


def _by_step(steps: list[dict[str, Any]], key: str, digits: int = 3) -> dict[str, float]:
    return {f"{share:.0%}": round(float(s[key]), digits) for share, s in zip(STEPS, steps,
                                                                             strict=True)}


def run(size: Size = "full", *, known: int | None = None, queued: int | None = None,
        sources: int | None = None) -> Iterator[Figure]:
    k, q, s = sized(size, smoke=(20_000, 4_000, 20), quick=(10_000_000, 2_000_000, 1_000),
                    full=(100_000_000, 20_000_000, 10_000))
    k, q, s = known or k, queued if queued is not None else q, sources or s
    if not (0 <= q <= k and s >= 1 and k >= 100):
        raise ValueError(f"need 100 <= known, 0 <= queued <= known, sources >= 1 "
                         f"(got known={k}, queued={q}, sources={s})")
    plan = Plan(size, k, q, s, warm_urls=sized(size, smoke=1_000, quick=50_000, full=100_000),
                dedup_checks=sized(size, smoke=2 * DEDUP_BATCH, quick=100_000, full=200_000),
                singles=sized(size, smoke=200, quick=2_000, full=2_000),
                discovery_pages=sized(size, smoke=5, quick=50, full=50),
                claim_seconds=sized(size, smoke=1.0, quick=3.0, full=5.0),
                site_backlog=sized(size, smoke=30, quick=300, full=500))
    steps, whole = measure(plan)
    last = steps[-1]
    sizes = {"known_urls": k, "queued_tasks": last["queued"], "sources": s}
    yield Figure("scale", "redis_used_memory_mb", last["redis_mb"], "MB", extra={
        **sizes, "by_step": _by_step(steps, "redis_mb"), "bloom_mb": round(last["bloom_mb"], 1),
        "bloom_capacity": max(k, 1_000_000), "after": "recovery rebuilt hot from cold"})
    yield Figure("scale", "redis_bytes_per_known_url", last["redis_mb"] * 2**20 / k, "B",
                 whole["scrapy_redis_bytes"], "scrapy-redis: a Redis SET of SHA-1 hex, per member",
                 extra={**sizes, "by_step": {f"{share:.0%}": round(x["redis_mb"] * 2**20
                                                                   / x["known"], 1)
                                             for share, x in zip(STEPS, steps, strict=True)}})
    yield Figure("scale", "crawler_rss_mb", last["crawler_rss"], "MB", extra={
        **sizes, "by_step": _by_step(steps, "crawler_rss", 1),
        "pages_staged": last["crawler_landed"], "process": "stratacrawl crawl",
        "wal_bytes_per_page_by_step": _by_step(steps, "wal_per_page", 0)})
    first = steps[0]
    yield Figure("scale", "dedup_checks_per_s", last["dedup_rate"], "1/s", first["dedup_rate"],
                 "the same at 1 % of the frontier", extra={
                     **sizes, "by_step": _by_step(steps, "dedup_rate", 0), "batch": DEDUP_BATCH,
                     "mix": "half known, half new"})
    yield Figure("scale", "dedup_p99_ms", last["dedup_p99"], "ms", first["dedup_p99"],
                 "the same at 1 % of the frontier",
                 extra={**sizes, "by_step": _by_step(steps, "dedup_p99")})
    yield Figure("scale", "claims_per_s", last["claims"], "1/s", first["claims"],
                 "the same at 1 % of the frontier", extra={
                     **sizes, "by_step": _by_step(steps, "claims", 0), "claimers": 4,
                     "first_round_by_step": _by_step(steps, "claims_first_round", 0),
                     "batch": 20, "double_claims": sum(x["double_claims"] for x in steps)})
    yield Figure("scale", "discovery_urls_per_s", last["discovery_rate"], "1/s",
                 first["discovery_rate"], "the same at 1 % of the frontier", extra={
                     **sizes, "by_step": _by_step(steps, "discovery_rate", 0),
                     "links_per_page": 200, "mix": "half known, half new"})
    yield Figure("scale", "recovery_resume_s", last["recovery_resume"], "s", extra={
        **sizes, "by_step": _by_step(steps, "recovery_resume"),
        "measured": "Redis flushed, then a claim loop beside the recovery: its first batch",
        "queues_rebuilt_s": _by_step(steps, "recovery_queues", 2)})
    yield Figure("scale", "recovery_full_s", last["recovery_full"], "s", last["recovery_floor"],
                 "streaming the same fingerprints out of PostgreSQL alone", extra={
                     **sizes, "by_step": _by_step(steps, "recovery_full", 2),
                     "floor_by_step": _by_step(steps, "recovery_floor", 2),
                     "steps": last["recovery_steps"]})
    yield Figure("scale", "cold_bytes_per_known_url", last["cold_bytes"] / k, "B", extra={
        **sizes, "by_step": {f"{share:.0%}": round(x["cold_bytes"] / x["known"], 1)
                             for share, x in zip(STEPS, steps, strict=True)},
        "tables": "url_state + tasks + task_keys, with indexes and TOAST"})
    yield Figure("scale", "sink_docs_per_s", whole["sunk"] / max(whole["sink_s"], 1e-9), "1/s",
                 extra={"warm_docs": whole["sunk"], "warm_urls": plan.warm_urls})
    yield Figure("scale", "bench_build_s", whole["build_s"], "s", extra=sizes)

