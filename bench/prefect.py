"""prefect: what running through Prefect costs.

``prefect_fetch_ratio``, printed as the figure's ratio: pages/s through Prefect (the
figure) over pages/s through the CLI (its baseline). The same kind of crawl (``n``
simulated sources, a fresh site and fresh tiers each time) runs as a flow run of the
``fetch`` deployment on a local process work pool and as ``stratacrawl crawl
--until-idle``, alternating, two of each (medians). Both clocks are what a user waits:
the CLI from spawning the process to its exit; Prefect from creating the flow run to its
final state (the worker's poll, its flow-run process, the flow's tasks and artifacts
included). Pages are the rows staging holds at the end, counted the same way for both.
``prefect_task_overhead_ms``: median wall time of one task run of ``flows.common.step``
around a coroutine that does nothing, in a flow run against the same server (awaiting
the coroutine directly is reported beside it, in microseconds).
"""

from __future__ import annotations

import asyncio
import json
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

import httpx
import psycopg

from bench.figure import Figure, Size, sized
from bench.servers import bench_runtime
from bench.site import simulated_site
from stratacrawl.cold.db import libpq_url
from stratacrawl.loadtest.prefect_pool import PrefectPool
from stratacrawl.services import Services
from stratacrawl.settings import Settings
from stratacrawl.wiring import Runtime

FIGURES = ("prefect_fetch_ratio", "prefect_task_overhead_ms")

QUEUE = "bench"
OVERHEAD_TASKS = 40
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _tier_env(rt: Runtime, state_dir: Path) -> dict[str, str]:
    s, ep = rt.settings, rt.endpoints
    plain = s.es_plain_json if s.es_plain_json is not None else "elasticsearch" in ep.embedded
    return {"STRATACRAWL_REDIS_URL": ep.redis_url, "STRATACRAWL_DATABASE_URL": ep.database_url,
            "STRATACRAWL_ELASTICSEARCH_URL": ep.elasticsearch_url,
            "STRATACRAWL_ES_PLAIN_JSON": str(plain).lower(),
            "STRATACRAWL_ES_INDEX_PREFIX": s.es_index_prefix,
            "STRATACRAWL_STATE_DIR": str(state_dir)}


def _now() -> str:
    """A site epoch of now (floored to the minute): sites of just their backlog."""
    return datetime.now(UTC).replace(second=0, microsecond=0).isoformat()


def _staged(rt: Runtime) -> int:
    with psycopg.connect(libpq_url(rt.endpoints.database_url)) as conn:
        row = conn.execute("SELECT count(*) FROM staging").fetchone()
    return int(row[0]) if row else 0


def _via_cli(env: dict[str, str], sources: Path) -> float:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "crawl", "--sources",
                           str(sources), "--until-idle"], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"stratacrawl crawl failed: {done.stderr[-2000:]}")
    return time.monotonic() - t0


def _via_prefect(pool: PrefectPool, sources: Path) -> float:
    t0 = time.monotonic()
    run_id = pool.submit("fetch", QUEUE, {"sources_file": str(sources), "minutes": 15.0,
                                          "until_idle": True})
    with httpx.Client(base_url=pool.stack.api_url, timeout=30) as api:
        while True:
            state = api.get(f"/flow_runs/{run_id}").json()["state"]
            if state["type"] in FINAL:
                break
            time.sleep(0.2)
    if state["type"] != "COMPLETED":
        raise RuntimeError(f"fetch flow run {run_id} ended {state['type']}: {state['message']}")
    return time.monotonic() - t0


def _overhead(env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "bench.prefect", "overhead"],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=600, cwd=Path(__file__).resolve().parents[1])
    if done.returncode != 0:
        raise RuntimeError(f"task overhead run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(size: Size = "full") -> Iterator[Figure]:
    n, backlog = sized(size, smoke=(2, 30), quick=(4, 300), full=(10, 1500))
    rates: dict[str, list[float]] = {"cli": [], "prefect": []}
    runs: list[dict[str, Any]] = []
    # one set of tiers for the whole run (the worker's environment names them); each
    # crawl gets the same database and Redis DB made anew
    with Services(Settings()), tempfile.TemporaryDirectory(prefix="bench-prefect-") as tmp:
        state = Path(tmp)
        with bench_runtime("prefect") as rt0:
            pool = PrefectPool(state / "prefect-stack", _tier_env(rt0, state))
        try:
            worker = pool.worker(QUEUE, state)
            pool.start()
            worker.start()
            for i, via in enumerate(["cli", "prefect", "prefect", "cli"]):
                with bench_runtime("prefect") as rt, simulated_site(
                        n, seed=11 + i, first_host=10, backlog=backlog, epoch=_now(),
                        write_to=state / f"sources-{i}.yaml"):
                    env = _tier_env(rt, state)  # the same database and Redis DB, made anew
                    seconds = (_via_cli(env, state / f"sources-{i}.yaml") if via == "cli"
                               else _via_prefect(pool, state / f"sources-{i}.yaml"))
                    pages = _staged(rt)
                rates[via].append(pages / seconds)
                runs.append({"via": via, "pages": pages, "seconds": round(seconds, 2)})
            overhead = _overhead(pool.env)
        finally:
            worker.kill()
            pool.stop()
    cli, prefect = statistics.median(rates["cli"]), statistics.median(rates["prefect"])
    # value: pages/s through Prefect; baseline: through the CLI; their ratio is the
    # prefect_fetch_ratio (target >= 0.95)
    yield Figure("prefect", "prefect_fetch_ratio", prefect, "1/s", cli,
                 "stratacrawl crawl on the same kind of site, same run",
                 extra={"sources": n, "backlog": backlog, "runs": runs, "target_ratio": 0.95})
    yield Figure("prefect", "prefect_task_overhead_ms", overhead["task_ms"], "ms",
                 extra={"tasks": OVERHEAD_TASKS,
                        "direct_await_us": round(overhead["direct_ms"] * 1000, 2)})


def _measure_overhead() -> dict[str, float]:
    """In a flow run on the server of ``PREFECT_API_URL``: per task run of ``step`` vs a
    direct await (milliseconds, medians)."""
    from prefect import flow

    from flows.common import step

    async def nothing() -> None:
        return None

    @flow(name="bench-task-overhead")
    async def overhead() -> dict[str, float]:
        task_s, direct_s = [], []
        for i in range(OVERHEAD_TASKS):
            t0 = time.perf_counter()
            await step(f"nothing {i}", nothing)
            task_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await nothing()
            direct_s.append(time.perf_counter() - t0)
        return {"task_ms": statistics.median(task_s) * 1000,
                "direct_ms": statistics.median(direct_s) * 1000}

    return asyncio.run(overhead())


if __name__ == "__main__" and sys.argv[1:] == ["overhead"]:
    print(json.dumps({**_measure_overhead(), "at": datetime.now().isoformat()}))
