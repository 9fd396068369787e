"""Real tiers for a benchmark: configured servers or embedded ones, a fresh database,
its own Redis DB and index prefix, so a benchmark never touches a crawl's data."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import AsyncIterator, Iterator

from stratacrawl.scratch import scratch_runtime
from stratacrawl.wiring import Components, Runtime, open_components

BENCH_REDIS_DBS = {"dedup": 13, "frontier": 14, "fetch": 12, "tiers": 11, "recovery": 9, "clean": 8,
                   "validate": 7, "monitor": 6, "loadtest": 5, "prefect": 4, "efficiency": 3,
                   "scale": 2, "scale_quick": 1, "scale_smoke": 15}


@contextlib.contextmanager
def bench_runtime(name: str, **overrides: object) -> Iterator[Runtime]:
    """Tiers for benchmark ``name``: its own database and Redis DB (benchmarks may overlap)."""
    with scratch_runtime(f"bench_{name}", BENCH_REDIS_DBS.get(name, 10), **overrides) as rt:
        yield rt


@contextlib.asynccontextmanager
async def bench_components(rt: Runtime) -> AsyncIterator[Components]:
    await rt.prepare()
    async with open_components(rt) as c:
        yield c


def rss_mb(pid: int | None = None) -> float:
    """Resident set size now (MB), from /proc."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
