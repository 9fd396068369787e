"""monitor: fetch throughput with monitoring on (live counters and traces per batch) and
off, same simulator, same sources, same run; ``monitor_overhead_ratio`` = on / off.

Each side crawls a fresh database and Redis DB from scratch (the same work). A discarded
warm-up crawl first fills the simulator's page cache (rendering pages costs the same two
cores); then the order alternates over rounds and the best round of each side is kept,
so a slow moment of the machine does not count against one side.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.crawl import crawl
from stratacrawl.process.tuning import tune_crawl_process

FIGURES = ("monitor_overhead_ratio",)

SOURCES = 10


async def _once(rt: Any, sources: Any, seconds: float) -> float:
    """Pages landed per second over a fixed time (a whole crawl's tail — a slow trap page
    fetched last — would swamp the difference being measured)."""
    tune_crawl_process()  # as `stratacrawl crawl` does
    async with bench_components(rt) as c:
        t0 = time.monotonic()
        report = await crawl(c, sources, until_idle=False, seconds=seconds)
        landed = report.writer.landed if report.writer else 0
        return landed / (time.monotonic() - t0)


def run(size: Size = "full") -> Iterator[Figure]:
    backlog, rounds, seconds = sized(size, smoke=(60, 1, 3.0), quick=(400, 1, 10.0),
                                     full=(1500, 3, 20.0))
    with simulated_site(SOURCES, 9, first_host=180, backlog=backlog) as (_, sources):
        best = {True: 0.0, False: 0.0}
        with bench_runtime("monitor") as rt:  # warm-up: every page rendered and cached
            uvloop.run(_once(rt, sources, seconds))
        for r in range(rounds):
            for monitoring in ((True, False) if r % 2 == 0 else (False, True)):
                with bench_runtime("monitor", monitoring=monitoring) as rt:
                    best[monitoring] = max(best[monitoring],
                                           uvloop.run(_once(rt, sources, seconds)))
    yield Figure("monitor", "monitor_overhead_ratio", best[True] / best[False], "ratio",
                 extra={"pages_per_s_on": round(best[True], 1),
                        "pages_per_s_off": round(best[False], 1), "sources": SOURCES,
                        "items_per_source": backlog, "rounds": rounds,
                        "seconds_per_crawl": seconds})
