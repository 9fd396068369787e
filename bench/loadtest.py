"""loadtest: the load test as a benchmark (3 workers, 200 sources, 10 minutes;
``--quick``: 3 workers, 60 sources, 2 minutes). Baseline: the 1,500 pages/s the platform
is sized for.
Workers are Prefect workers of a process work pool running the fetch deployment (the
production path); ``STRATACRAWL_LOADTEST_VIA=processes`` runs plain crawl processes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from bench.figure import Figure, Size, sized
from bench.servers import BENCH_REDIS_DBS
from stratacrawl.loadtest.report import publish_artifact, write_report
from stratacrawl.loadtest.result import VIAS, LoadTestConfig
from stratacrawl.loadtest.run import run_loadtest
from stratacrawl.loadtest.summary import SEED_FIGURES
from stratacrawl.scratch import scratch_runtime
from stratacrawl.settings import Settings

FIGURES = ("loadtest_pages_per_s",
           "loadtest_success_rate",
           "loadtest_duplicate_fetches",
           "loadtest_rate_violations")


def run(size: Size = "full") -> Iterator[Figure]:
    via = os.environ.get("STRATACRAWL_LOADTEST_VIA", "prefect")
    if via not in VIAS:
        raise SystemExit(f"STRATACRAWL_LOADTEST_VIA={via!r}: expected one of {', '.join(VIAS)}")
    cfg = sized(size, smoke=LoadTestConfig(workers=2, sources=4, minutes=0.3, via=via,
                                           drain_limit_s=30.0),
                quick=LoadTestConfig(workers=3, sources=60, minutes=2.0, via=via),
                full=LoadTestConfig(workers=3, sources=200, minutes=10.0, via=via))
    out = Settings().state_path / "loadtest" / f"bench-{size}"
    with scratch_runtime("bench_loadtest", BENCH_REDIS_DBS["loadtest"]) as rt:
        result = run_loadtest(rt, cfg, out)
    md, _ = write_report(result, Path(out))
    publish_artifact(md)
    if result.failed:
        raise RuntimeError("the load test measured nothing: " + "; ".join(
            f"{who}: {why}" for who, why in result.failed.items()) + f" (report: {md})")
    f = result.figures
    extra = {"workers": cfg.workers, "sources": cfg.sources, "minutes": cfg.minutes,
             "via": cfg.via, "report": str(md)}
    yield Figure("loadtest", "loadtest_pages_per_s", f["loadtest_pages_per_s"], "1/s",
                 SEED_FIGURES["pages_per_s"], "reference deployment: 1,500 pages/s over 3 nodes",
                 extra={**extra, "window_s": f["window_s"],
                        "mean_latency_ms": f["mean_latency_ms"],
                        "p99_latency_ms": f["p99_latency_ms"]})
    yield Figure("loadtest", "loadtest_success_rate", f["loadtest_success_rate_excl_injected"],
                 "ratio", SEED_FIGURES["success_rate"], "reference deployment: 99.2 %", extra=extra)
    yield Figure("loadtest", "loadtest_duplicate_fetches", f["loadtest_duplicate_fetches"], "1",
                 None, None, extra=extra)
    yield Figure("loadtest", "loadtest_rate_violations", f["loadtest_rate_violations"], "1",
                 None, None, extra={**extra, "peak_rate_ratio": f["loadtest_peak_rate_ratio"]})
