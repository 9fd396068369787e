"""The load test end to end, small: two worker processes, one killed with SIGKILL."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from stratacrawl.cold.db import libpq_url
from stratacrawl.loadtest.report import write_report
from stratacrawl.loadtest.result import LoadTestConfig
from stratacrawl.loadtest.run import run_loadtest
from stratacrawl.scratch import scratch_runtime
from stratacrawl.stack import HEARTBEAT_S

pytestmark = pytest.mark.slow


def test_two_workers_one_killed_lose_nothing_and_stay_polite(tmp_path: Path) -> None:
    # Killed early, so the other has a minute to take its tasks over even on a loaded
    # machine (a kill at 30 s of 60 left some CI runs with every one still queued).
    cfg = LoadTestConfig(workers=2, sources=6, minutes=1.5, rate=6.0, concurrency=4,
                         batch_size=5, max_batches=64, backlog=300, kill_at=0.3, lease_s=8.0,
                         drain_limit_s=60.0)
    with scratch_runtime("test_loadtest", 4) as rt:
        result = run_loadtest(rt, cfg, tmp_path)
        with psycopg.connect(libpq_url(rt.database_url)) as conn:
            outbox = conn.execute("SELECT count(*) FROM warm_outbox").fetchone()
    f = result.figures
    assert not result.failed, result.failed
    assert f["pages_landed"] > 50
    assert f["staging_rows"] == f["pages_landed"]          # every fetch landed exactly once
    assert f["loadtest_duplicate_fetches"] == 0
    assert f["loadtest_rate_violations"] == 0
    assert f["loadtest_success_rate_excl_injected"] >= 0.97
    k = result.killed
    assert k["worker"] == "worker-1" and k["lost"] == 0, k
    assert (k["refetched_by_others"] + k["still_queued"] + k["held_by_dead_worker"]
            + k["finished_before_the_kill"] + k["redundant"]) == k["leased"], k
    assert k["held_by_dead_worker"] == 0, k     # its leases expired and went to the other
    assert k["refetched_by_others"] > 0, k
    assert not result.workers["worker-2"]["killed"]
    after_kill = [s for s in result.samples if s.t > k["at_s"]]
    assert after_kill[-1].landed["worker-2"] > after_kill[0].landed["worker-2"]  # it went on
    cpu = result.cpu_ms_per_page   # every component, the storage servers read from the OS
    assert {"fetch workers", "cleaner", "simulator", "postgres", "redis",
            "elasticsearch_api"} <= set(cpu) and all(v >= 0 for v in cpu.values())
    assert cpu["fetch workers"] > 0 and cpu["postgres"] > 0
    # The warm indexing the workers left to the demotion deployment was done and counted.
    assert outbox == (0,) and "demotion left by the workers" in cpu
    assert f["demoted_after_run"] >= 0
    # 1,500 pages/s at that cost, to one decimal (a tolerance, not a second rounding:
    # 13.3 * 1.5 and 13.3 * 1500 / 1000 round to 20.0 and 19.9 in binary floating point)
    assert abs(f["cores_for_target_rate"] - f["cpu_ms_per_page"] * 1.5) <= 0.05 + 1e-9
    md, png = write_report(result, tmp_path)
    text = md.read_text()
    assert "kill -9 of worker-1" in text and "| worker-2 |" in text
    assert "## CPU per page" in text and "1,500 pages/s needs about" in text
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_prefect_work_pool_workers_share_the_crawl_and_take_over_a_dead_one(
        tmp_path: Path) -> None:
    """The same load test through Prefect: a server, the process work pool, one Prefect
    worker per host running a `fetch` flow run, and a `cleaning` run beside them; one host
    (Prefect worker and its flow run) killed with SIGKILL."""
    cfg = LoadTestConfig(workers=2, sources=4, minutes=1.5, rate=6.0, concurrency=4,
                         batch_size=5, max_batches=64, backlog=200, kill_at=0.5, lease_s=10.0,
                         drain_limit_s=60.0, via="prefect")
    with scratch_runtime("test_loadtest_prefect", 4) as rt:
        result = run_loadtest(rt, cfg, tmp_path)
    f = result.figures
    assert result.flow_runs["worker-2"] == "COMPLETED", result.flow_runs
    assert result.flow_runs["worker-1"] == "CRASHED"        # killed: missed heartbeats
    assert 0 < result.killed["flow_run_crashed_after_s"] <= 3 * HEARTBEAT_S + 30
    assert result.workers["worker-2"]["fetched"] > 0        # its progress came through Prefect
    assert f["pages_landed"] > 50 and f["staging_rows"] == f["pages_landed"]
    assert f["records"] > 0                                 # the cleaning flow run cleaned
    assert f["loadtest_duplicate_fetches"] == 0
    assert f["loadtest_rate_violations"] == 0
    k = result.killed
    assert k["lost"] == 0 and k["held_by_dead_worker"] == 0 and k["refetched_by_others"] > 0
    assert result.cpu_ms_per_page["prefect-server"] > 0   # the Prefect server's share
    md, _ = write_report(result, tmp_path)
    assert "Prefect workers of a process work pool" in md.read_text()
