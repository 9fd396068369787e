"""integrity: what the minute-level integrity check costs beside the crawl and the cleaning
it checks.

Three simulator sources (news, products, prices) at the demo's rate (50 requests/s each)
are crawled for as long as a cleaning run lasts (the deployment's 4 minutes; shorter with
``--quick``) with a cleaner following in the same process — the work the check rides on;
its CPU time is the baseline: this process's (fetching, staging, extraction, landing) and
the PostgreSQL and Redis servers' meanwhile. Then the check runs as that cleaning run runs
it: one look every ``CHECK_S`` at every source's window (each look made to find new
pages, so every look validates: the most a run pays), Great Expectations' import (~3 CPU
s, once a run) included. Value: the checks' CPU seconds; ratio: their share of the
crawl's and cleaning's (target ≤ 0.03). ``integrity_check_ms`` is one look at one
source's window (its pages read from PostgreSQL, validated by GX on a pandas batch).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.clean.run import clean_staged
from stratacrawl.crawl import crawl
from stratacrawl.process.tuning import tune_long_running
from stratacrawl.validate.integrity import CHECK_S, IntegrityCheck

RATE = 50.0
FIGURES = ("integrity_check_cpu_s", "integrity_check_ms")


async def _measure(sources: Any, seconds: float) -> dict[str, Any]:
    with bench_runtime("integrity") as rt, tempfile.TemporaryDirectory() as folder:
        async with bench_components(rt) as c:
            c.settings.expectations_dir = Path(folder)   # no project: the default suites
            cpu0, servers0 = time.process_time(), _servers_cpu()
            await asyncio.gather(
                crawl(c, sources, until_idle=False, seconds=seconds, flush_s=0.5),
                clean_staged(c.cleaner(sources), seconds=seconds + 2, follow=True))
            process_cpu = time.process_time() - cpu0
            servers_cpu = _servers_cpu() - servers0
            report = await clean_staged(c.cleaner(sources))   # what is left
            check = IntegrityCheck(pool=c.pool, redis=c.redis, settings=c.settings,
                                   sources=sources)
            looks = max(1, round(seconds / CHECK_S))
            cpu0 = time.process_time()
            results = []
            for _ in range(looks):
                check._seen.clear()   # as if each window had new pages: every look validates
                results += await check.check()
            check_cpu = time.process_time() - cpu0
            # one look at one source, GX warm
            check._seen.clear()
            one = sources.ids[0]
            t0 = time.process_time()
            await check.check([one])
            one_ms = (time.process_time() - t0) * 1000
    return {"work_cpu": process_cpu + servers_cpu, "process_cpu": process_cpu,
            "servers_cpu": servers_cpu, "check_cpu": check_cpu, "looks": looks,
            "windows": len(results), "pages": sum(r.pages for r in results),
            "collapsed": sum(r.collapsed for r in results), "one_ms": one_ms,
            "cleaned": report.stats.pages,
            "window": {r.source_id: r.pages for r in results[-len(sources.ids):]}}


def _servers_cpu() -> float:
    """CPU seconds used so far by this host's PostgreSQL and Redis server processes."""
    total = 0.0
    for proc in psutil.process_iter(["name", "cpu_times"]):
        if proc.info["name"] in ("postgres", "redis-server") and proc.info["cpu_times"]:
            total += proc.info["cpu_times"].user + proc.info["cpu_times"].system
    return total


def run(size: Size = "full") -> Iterator[Figure]:
    tune_long_running()
    seconds = sized(size, smoke=4.0, quick=60.0, full=240.0)
    epoch = datetime.now(UTC).isoformat(timespec="seconds")
    with simulated_site(3, 11, first_host=230, backlog=sized(size, smoke=200, quick=4000,
                                                             full=15000),
                        epoch=epoch, rate=RATE) as (_, sources):
        m = uvloop.run(_measure(sources, seconds))
    extra = {"seconds": seconds, "process_cpu_s": round(m["process_cpu"], 2),
             "servers_cpu_s": round(m["servers_cpu"], 2), "looks": m["looks"],
             "windows_checked": m["windows"],
             "pages_checked": m["pages"], "collapsed": m["collapsed"],
             "window_pages": m["window"], "check_every_s": CHECK_S}
    yield Figure("integrity", "integrity_check_cpu_s", m["check_cpu"], "CPU s",
                 baseline=m["work_cpu"], baseline_name=(
                     f"crawl + clean CPU s over {seconds:.0f} s (3 sources at {RATE:.0f}/s)"),
                 extra=extra)
    yield Figure("integrity", "integrity_check_ms", m["one_ms"], "CPU ms",
                 extra={"source": sources.ids[0], "window_pages": m["window"].get(sources.ids[0])})
