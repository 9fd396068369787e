"""Run the load test: simulator with real sites' latency (median ~1.6 s), N crawl workers,
one cleaner, sampled from outside every few seconds; one worker killed with SIGKILL halfway.

Everything measured here is measured where a user would measure it: pages/s from what
landed in staging, rate violations from the arrivals the simulator counted per source and
second, duplicates and lost tasks from the ledger and staging tables.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml

from stratacrawl.cold import run_audit as audit
from stratacrawl.cold.db import libpq_url
from stratacrawl.loadtest.cpu import ServerCPU, demote_the_rest
from stratacrawl.loadtest.prefect_pool import CRASH_DETECTION_S, PrefectPool
from stratacrawl.loadtest.processes import (
    CLEANER_NICE,
    ChildProcess,
    UsageProbe,
    cleaner,
    crawl_worker,
)
from stratacrawl.loadtest.result import LoadTestConfig, LoadTestResult, Sample
from stratacrawl.loadtest.summary import cpu_per_page, summarize, usage_figures
from stratacrawl.sim import build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sim.process import SimulatorProcess
from stratacrawl.wiring import Runtime

log = logging.getLogger(__name__)

# How long a worker may take, after its fetching time, to print its final report (its
# last flushes and the demotion of what it committed): a minute was not always enough
# on 2 cores, and a worker stopped before it loses its success and latency figures.
FINAL_WAIT_S = 180.0
# The simulator stands in for 200 remote sites, on machines of their own in real life.
# Here it shares 2 cores with everything it measures; starved, its event loop stalled for
# seconds (1,131 of the 30-minute run's seconds >= 100 ms, at most 14.5 s) and stamped
# the requests of a stall together: all 327 of that run's violations fell in such
# seconds. Niced ahead (-5) of the workers, it stamps arrivals when they come.
SIM_PRIORITY = 5
SIM_STATS_TIMEOUT_S = 30.0


def _db(rt: Runtime) -> psycopg.Connection[Any]:
    return psycopg.connect(libpq_url(rt.database_url), autocommit=True)


def _sample_tiers(conn: psycopg.Connection[Any]) -> tuple[int, int, int, int]:
    return audit.tier_fill(conn)


def _sim_arrivals(sim: SimulatorProcess, into: dict[str, dict[int, int]],
                  result: LoadTestResult) -> None:
    """Per source, requests that arrived in each second, and the simulator's worst loop
    lag in each second (it keeps 10 minutes of both) and its collections so far. A source
    that does not answer is asked again at the next poll (a minute later, well within
    the 10 minutes): a busy simulator must not end the run."""
    lag_ms = result.sim_lag_ms
    with httpx.Client(timeout=SIM_STATS_TIMEOUT_S) as client:
        for s in sim.sources:
            try:
                stats = client.get(s["url"] + "/_sim/stats").json()
            except (httpx.HTTPError, ValueError) as e:
                result.sim_polls_failed += 1
                log.warning("loadtest: simulator stats of %s unavailable (%r)", s["url"], e)
                continue
            result.sim_gc = stats.get("gc", {})
            for sec, n in stats["per_second"].items():
                into[stats["source"]][int(sec)] = max(into[stats["source"]].get(int(sec), 0), n)
            for sec, ms in stats.get("loop_lag_ms", {}).items():
                lag_ms[int(sec)] = max(lag_ms.get(int(sec), 0.0), float(ms))


def _write_sources(cfg: LoadTestConfig, sim: SimulatorProcess, epoch: datetime,
                   out: Path) -> Path:
    specs = build_specs(cfg.sources, cfg.seed, epoch=epoch, first_host=cfg.first_host,
                        ports=[int(s["url"].rsplit(":", 1)[1]) for s in sim.sources], noise=True)
    document = sources_document(specs, rate=cfg.rate, concurrency=cfg.concurrency)
    for entry in document["sources"]:
        entry["batch_size"] = cfg.batch_size
    path = out / "sources.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def run_loadtest(rt: Runtime, cfg: LoadTestConfig, out: Path) -> LoadTestResult:
    """Run it; the report and chart are written to ``out`` by :mod:`.report`."""
    out.mkdir(parents=True, exist_ok=True)
    asyncio.run(rt.prepare())
    epoch = datetime.now(UTC).replace(microsecond=0)
    result = LoadTestResult(cfg)
    seconds = cfg.minutes * 60
    sim_args = ["--sources", str(cfg.sources), "--seed", str(cfg.seed), "--epoch",
                epoch.isoformat(), "--first-host", str(cfg.first_host), "--noise",
                "--backlog", str(cfg.items_per_source())]
    with SimulatorProcess(*sim_args, priority=SIM_PRIORITY) as sim:
        result.sim_reniced = sim.reniced
        sources = _write_sources(cfg, sim, epoch, out)
        env = {**rt.child_env(out / "state"), "STRATACRAWL_FETCH_MAX_BATCHES":
               str(cfg.max_batches), "STRATACRAWL_LEASE_S": str(cfg.lease_s),
               "STRATACRAWL_PG_POOL_SIZE": str(cfg.pg_pool_size)}
        pool = PrefectPool(out / "state", env) if cfg.via == "prefect" else None
        names = [f"worker-{i + 1}" for i in range(cfg.workers)]
        if pool is None:
            workers = [crawl_worker(n, sources, seconds, env, out / "logs") for n in names]
            clean = cleaner("cleaner", sources, seconds + cfg.drain_limit_s, env, out / "logs")
        else:
            workers = [pool.worker(n, out / "logs") for n in names]
            clean = pool.worker("cleaner", out / "logs", nice=CLEANER_NICE)
        arrivals: dict[str, dict[int, int]] = defaultdict(dict)
        assert sim.proc is not None
        others = {"simulator": UsageProbe(sim.proc.pid)}
        servers = ServerCPU.of_endpoints(rt.endpoints)
        try:
            if pool is not None:
                others["prefect-server"] = UsageProbe(pool.start(), tree=True)
            before = servers.read()
            _run(rt, cfg, result, workers, clean, pool, sim, sources, arrivals, others)
            rest = asyncio.run(demote_the_rest(rt))
            result.figures["demoted_after_run"] = rest.rows
            if rest.error:   # the CPU per page then leaves part of the warm indexing out
                result.failed["demotion after the run"] = rest.error
            cpu_per_page(result, {
                "fetch workers": sum(w.usage.cpu_seconds for w in workers),
                "cleaner": clean.usage.cpu_seconds,
                **{name: probe.usage.cpu_seconds for name, probe in others.items()},
                "demotion left by the workers": rest.client_cpu_s,
                **ServerCPU.spent(before, servers.read())})
        finally:
            for p in (*workers, clean):
                p.wait(0)
            if pool is not None:
                if result.killed and result.killed_at is not None:
                    seen = pool.await_crashed(result.killed["worker"],
                                              result.killed_at + CRASH_DETECTION_S)
                    result.killed["flow_run_crashed_after_s"] = (
                        round(seen - result.killed_at, 1) if seen is not None else None)
                result.flow_runs = pool.states()
                pool.stop()
    return result


def _run(rt: Runtime, cfg: LoadTestConfig, result: LoadTestResult, workers: list[ChildProcess],
         clean: ChildProcess, pool: PrefectPool | None, sim: SimulatorProcess, sources: Path,
         arrivals: dict[str, dict[int, int]], others: dict[str, UsageProbe]) -> None:
    seconds = cfg.minutes * 60
    with _db(rt) as conn:
        for p in (*workers, clean):
            p.start()
        if pool is not None:  # one fetch run per worker, cleaning beside them
            for w in workers:
                pool.submit("fetch", w.name, {"sources_file": str(sources),
                                              "minutes": cfg.minutes, "until_idle": False,
                                              "worker_id": w.name, "json_lines": True})
            pool.submit("cleaning", clean.name, {
                "sources_file": str(sources), "follow": True,
                "minutes": cfg.minutes + cfg.drain_limit_s / 60})
        t0 = time.monotonic()
        next_sim = t0 + 60
        kill_at = t0 + seconds * cfg.kill_at if cfg.kill_at and cfg.workers > 1 else None
        while any(w.running for w in workers):
            time.sleep(cfg.sample_s)
            now = time.monotonic()
            for p in (*workers, clean):
                p.sample()
            for probe in others.values():
                probe.sample()
            backlog, staged, uncleaned, records = _sample_tiers(conn)
            result.samples.append(Sample(
                now - t0, {w.name: int(w.final["landed"]) if w.final else
                           int(w.latest().get("landed", 0)) for w in workers},
                backlog, staged, uncleaned, records))
            if now >= next_sim:
                _sim_arrivals(sim, arrivals, result)
                next_sim = now + 60
            if kill_at is not None and now >= kill_at and workers[0].latest().get("landed"):
                result.killed = _kill(conn, workers[0], now - t0)
                result.killed_at = time.time()
                kill_at = None
            # Workers stop themselves; this is a backstop (flow runs start later and
            # wind down under the same load: more slack through Prefect).
            if now - t0 > seconds + (300 if pool is not None else 120):
                break
        fetch_seconds = time.monotonic() - t0
        if pool is not None:   # the flow runs that reported: let them finish first
            pool.await_finished([w.name for w in workers if w.final is not None],
                                time.time() + FINAL_WAIT_S)
        for w in workers:
            code = w.wait(FINAL_WAIT_S)
            if pool is None and not w.killed and code:   # (a Prefect worker is stopped)
                result.failed[w.name] = f"exited {code}: {_last_line(w.log_path)}"
        _sim_arrivals(sim, arrivals, result)
        drain = _drain(conn, clean, cfg.drain_limit_s)
        clean.wait(5)
        result.seconds = fetch_seconds
        summarize(result, conn, workers, clean, sources, arrivals, drain)
        if not result.figures.get("staging_rows"):
            result.failed["run"] = "no page was staged (see the workers' logs)"
        for name, probe in others.items():
            result.processes[name] = usage_figures(probe.usage)


def _last_line(log: Path) -> str:
    """The last line a child wrote to its log (its error, when it failed)."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(an empty log)"


def _kill(conn: psycopg.Connection[Any], worker: ChildProcess, at: float) -> dict[str, Any]:
    leased = audit.leased_by(conn, worker.name)
    worker.kill()
    log.info("loadtest: killed %s at %.0f s holding %d leased tasks", worker.name, at,
             len(leased))
    return {"worker": worker.name, "at_s": round(at, 1), "leased": leased}


def _drain(conn: psycopg.Connection[Any], clean: ChildProcess, limit_s: float) -> dict[str, Any]:
    """After fetching stops: how long cleaning takes to catch up (bounded by ``limit_s``)."""
    t0 = time.monotonic()
    start = audit.uncleaned(conn)
    left = start
    while left and time.monotonic() - t0 < limit_s and clean.alive:
        time.sleep(2)
        clean.sample()
        left = audit.uncleaned(conn)
    return {"backlog_at_end": int(start), "left": int(left),
            "drain_s": round(time.monotonic() - t0, 1) if not left else None}
