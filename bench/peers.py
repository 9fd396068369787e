"""peers: the same simulated sources crawled by Stratacrawl and by Scrapy, back to back.

Twenty sources (news, products, prices; ~1,500 items each behind chains of ~75 list
pages), each at rate 500 and concurrency 8 in the sources file, robots.txt obeyed. Each
run gets a simulator of its own, started fresh (the same site for both), and Stratacrawl
a database, Redis DB and index prefix of its own. Runs alternate (Stratacrawl first,
then Scrapy, twice; once with ``--quick``, on 6 sources of 300 items).

- Stratacrawl: ``stratacrawl crawl --until-idle --json`` in its own process, into
  staging (ledger, dedup, compression, transactional staging, the warm index);
- Scrapy: ``bench/peer_spider.py``, a spider of the same scope writing every page to a
  JSON-lines feed, tuned as its users tune it (``CONCURRENT_ITEMS=1``, no download of
  the public-suffix list).

Per crawler: whole-crawl seconds (process start to exit), pages fetched, pages/s, CPU
seconds per 1,000 pages of the crawler process and — for Stratacrawl — of the storage
servers it used (PostgreSQL, Redis, the Elasticsearch API, read from the OS), peak RSS.
Stratacrawl's CPU includes the warm indexing its pages need that the crawl left to the
``demotion`` deployment (``end_demotion_s`` bounds the crawl's own end demotion): it is
run after the crawl's clock stops, and its client and server CPU are added.
``peer_wall_ratio`` = Scrapy's seconds ÷ Stratacrawl's (≥ 1: Stratacrawl is no slower);
``peer_cpu_ratio`` = Scrapy's CPU per 1,000 pages ÷ Stratacrawl's crawler plus servers;
``list_hop_ms_p50``: a list page's fetch → its links in the frontier (median).

``--noise``: sites with real latency instead — 8 sources of ~600 items whose every answer
takes ~1.6 s (log-normal, a slow tail) with a little 5xx and dropped connections, as
real sites answer. There the crawl is bound by concurrency x latency (8 sources x 8
requests in flight), so each crawler's seconds are also given as a share of that bound
(``of_bound``: 1.0 = every slot busy from start to end).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_runtime
from bench.site import simulated_site
from stratacrawl.loadtest.cpu import ServerCPU, demote_the_rest
from stratacrawl.monitor.histogram import LatencyHistogram

FIGURES = ("peer_wall_ratio", "peer_cpu_ratio", "list_hop_ms_p50")

ROOT = Path(__file__).resolve().parents[1]
RATE = 500.0
FULL = {"sources": 20, "backlog": 1500, "rounds": 2}
QUICK = {"sources": 6, "backlog": 300, "rounds": 1}
SMOKE = {"sources": 2, "backlog": 30, "rounds": 1}
NOISY_FULL = {"sources": 8, "backlog": 600, "rounds": 2}
NOISY_QUICK = {"sources": 4, "backlog": 150, "rounds": 1}
NOISY_SMOKE = {"sources": 2, "backlog": 20, "rounds": 1}
CONCURRENCY = 8
# The simulator's noisy latency: log-normal, median 1.62 s, sigma 0.35 (mean = median *
# e^(sigma²/2)), one request in 500 ten times slower.
NOISY_MEAN_LATENCY_S = 1.62 * math.exp(0.35 ** 2 / 2) * (1 + 0.002 * 9)
TIMEOUT_S = 900


def _run(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, float, int]:
    """(seconds from start to exit, CPU seconds, peak RSS in MB) of the process ``argv``
    (its own figures: ``wait4`` reports on that one child)."""
    t0 = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu, rss = usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[2]} exited {proc.returncode}; see {log}:\n"
                           + log.read_text(errors="replace")[-2000:])
    return time.monotonic() - t0, cpu, rss


def _stratacrawl(round_: int, folder: Path, sources_yaml: Path) -> dict[str, Any]:
    with bench_runtime(f"peers{round_}") as rt:
        uvloop.run(rt.prepare())   # the schema is there before the clock starts
        servers = ServerCPU.of_endpoints(rt.endpoints)
        before = servers.read()
        log = folder / f"stratacrawl-{round_}.log"
        seconds, cpu, rss = _run(
            [sys.executable, "-m", "stratacrawl", "crawl", "--sources", str(sources_yaml),
             "--until-idle", "--json", "--worker-id", f"peer-{round_}"],
            rt.child_env(folder / f"state-{round_}"), log)
        rest = uvloop.run(demote_the_rest(rt))   # see "Per crawler" above
        if rest.error:
            raise RuntimeError(f"demotion after the crawl failed: {rest.error}")
        spent = ServerCPU.spent(before, servers.read())
    report = json.loads(log.read_text().strip().splitlines()[-1])
    hops = LatencyHistogram.from_json(report.get("list_hops") or {})
    return {"seconds": seconds, "pages": int(report["fetched"]),
            "cpu_s": cpu + rest.client_cpu_s, "servers_cpu_s": spent, "peak_rss_mb": rss,
            "demoted_after_exit": rest.rows,
            "list_hop_ms_p50": hops.quantile_ms(0.5), "list_hop_ms_p99": hops.quantile_ms(0.99),
            "list_pages_hopped": hops.count, "tail_s": report.get("tail_s")}


def _scrapy(round_: int, folder: Path, sources_yaml: Path) -> dict[str, Any]:
    feed, stats = folder / f"scrapy-{round_}.jsonl", folder / f"scrapy-{round_}.stats.json"
    seconds, cpu, rss = _run([sys.executable, "-m", "bench.peer_spider", str(sources_yaml),
                              str(feed), str(stats)],
                             {**os.environ, "PYTHONPATH": str(ROOT)},
                             folder / f"scrapy-{round_}.log")
    counted = json.loads(stats.read_text())
    pages = int(counted.get("downloader/response_count", 0))
    return {"seconds": seconds, "pages": pages, "cpu_s": cpu, "peak_rss_mb": rss,
            "items_written": int(counted.get("item_scraped_count", 0)),
            "feed_mb": round(feed.stat().st_size / 1e6, 1) if feed.exists() else 0.0}


def _per_1k(cpu_s: float, pages: int) -> float:
    return cpu_s / max(pages, 1) * 1000


def run(size: Size = "full", noise: bool = False) -> Iterator[Figure]:
    shape = (sized(size, smoke=NOISY_SMOKE, quick=NOISY_QUICK, full=NOISY_FULL) if noise
             else sized(size, smoke=SMOKE, quick=QUICK, full=FULL))
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        folder = Path(tmp)
        for round_ in range(shape["rounds"]):
            for crawler, into in (("stratacrawl", ours), ("scrapy", theirs)):
                sources_yaml = folder / f"sources-{crawler}-{round_}.yaml"
                epoch = datetime.now(UTC).isoformat()   # a finite site: its backlog
                with simulated_site(shape["sources"], 5, first_host=60, rate=RATE,
                                    backlog=shape["backlog"], oversized_rate=0.0,
                                    write_to=sources_yaml, epoch=epoch, noise=noise):
                    fn = _stratacrawl if crawler == "stratacrawl" else _scrapy
                    into.append(fn(round_, folder, sources_yaml))
    yield from _figures(ours, theirs, shape["sources"], noise)


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)


def _figures(ours: list[dict[str, Any]], theirs: list[dict[str, Any]],
             sources: int, noise: bool) -> Iterator[Figure]:
    our_s, their_s = _median(ours, "seconds"), _median(theirs, "seconds")
    our_cpu = statistics.median(_per_1k(r["cpu_s"], r["pages"]) for r in ours)
    server_cpu = {name: statistics.median(_per_1k(r["servers_cpu_s"].get(name, 0.0), r["pages"])
                                          for r in ours)
                  for name in ours[0]["servers_cpu_s"]}
    their_cpu = statistics.median(_per_1k(r["cpu_s"], r["pages"]) for r in theirs)
    def with_rates(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "cpu_s_per_1k_pages": round(_per_1k(r["cpu_s"], r["pages"]), 3),
                 "pages_per_s": round(r["pages"] / r["seconds"], 1)} for r in runs]

    rows = {"stratacrawl": with_rates(ours), "scrapy": with_rates(theirs)}
    common = {"sources": sources, "rate": RATE, "concurrency": CONCURRENCY,
              "sites": "noisy" if noise else "quiet", "runs": rows}
    if noise:
        # Every page costs one latency in one of sources x concurrency slots.
        bound_s = _median(theirs, "pages") * NOISY_MEAN_LATENCY_S / (sources * CONCURRENCY)
        common["bound_s"] = round(bound_s, 1)
        common["of_bound"] = {"stratacrawl": round(bound_s / our_s, 3),
                              "scrapy": round(bound_s / their_s, 3)}
    yield Figure("peers", "peer_wall_ratio", their_s / our_s, "x", extra={
        "stratacrawl_s": round(our_s, 1), "scrapy_s": round(their_s, 1),
        "stratacrawl_pages_per_s": round(_median(ours, "pages") / our_s, 1),
        "scrapy_pages_per_s": round(_median(theirs, "pages") / their_s, 1), **common})
    total = our_cpu + sum(server_cpu.values())
    yield Figure("peers", "peer_cpu_ratio", their_cpu / total, "x", extra={
        "scrapy_cpu_s_per_1k_pages": round(their_cpu, 3),
        "stratacrawl_cpu_s_per_1k_pages": round(our_cpu, 3),
        "servers_cpu_s_per_1k_pages": {k: round(v, 3) for k, v in server_cpu.items()},
        "stratacrawl_peak_rss_mb": max(r["peak_rss_mb"] for r in ours),
        "scrapy_peak_rss_mb": max(r["peak_rss_mb"] for r in theirs)})
    hops = [r["list_hop_ms_p50"] for r in ours if r["list_hop_ms_p50"] is not None]
    yield Figure("peers", "list_hop_ms_p50", statistics.median(hops) if hops else float("nan"),
                 "ms", extra={"p99_ms": [r["list_hop_ms_p99"] for r in ours],
                              "list_pages": [r["list_pages_hopped"] for r in ours],
                              "crawl_tail_s": [r["tail_s"] for r in ours]})
