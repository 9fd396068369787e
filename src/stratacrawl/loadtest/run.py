"""Run the load test: simulator with the seed's latency, N crawl workers, one cleaner,
sampled from outside every few seconds; one worker killed with SIGKILL halfway.

Everything measured here is measured where a user would measure it: pages/s from what
landed in staging, rate violations from the arrivals the simulator counted per source and
second, duplicates and lost tasks from the ledger and staging tables.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml

from stratacrawl.cold import run_audit as audit
from stratacrawl.cold.db import libpq_url
from stratacrawl.cold.runs import worker_of
from stratacrawl.loadtest.prefect_pool import CRASH_DETECTION_S, PrefectPool
from stratacrawl.loadtest.processes import (
    CLEANER_NICE,
    ChildProcess,
    Usage,
    UsageProbe,
    cleaner,
    crawl_worker,
)
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.runtime import Runtime
from stratacrawl.sim import build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sim.process import SimulatorProcess

log = logging.getLogger(__name__)

# What the simulator injects as the seed's normal noise; failures for these reasons are
# the simulated web's, not the crawler's (success rate is also reported with them).
INJECTED = ("http-500", "http-502", "http-503", "http-504", "connection-reset",
            "transport-error")
VIAS = ("processes", "prefect")  # how workers run: crawl processes, or Prefect flow runs
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
SIM_STALL_MS = 100.0  # a simulator second whose loop ran this late stamped arrivals late
SEED_FIGURES = {"pages_per_s": 1500, "success_rate": 0.992, "mean_latency_ms": 1800,
                "p99_latency_ms": 3500}


@dataclass
class LoadTestConfig:
    workers: int = 3
    sources: int = 200
    minutes: float = 10.0
    seed: int = 7
    rate: float = 12.0             # per source, requests/s (the crawler's limit)
    concurrency: int = 16          # batches (= requests in flight) per source
    batch_size: int = 10
    max_batches: int = 1000        # per worker
    kill_at: float | None = 0.5    # share of the run after which one worker is killed
    backlog: int | None = None     # items per source (default: enough for the run)
    lease_s: float = 60.0          # how soon a dead worker's tasks go to the others
    pg_pool_size: int = 24         # per worker: a thousand batches share it
    sample_s: float = 2.0
    drain_limit_s: float = 300.0   # how long cleaning may catch up after the run
    first_host: int = 10
    via: str = "processes"         # or "prefect": workers of a Prefect process work pool
    redis_cluster: int = 0         # nodes of the Redis Cluster the hot tier ran on (0: one)

    def __post_init__(self) -> None:
        if self.via not in VIAS:
            raise ValueError(f"via={self.via!r}: expected one of {', '.join(VIAS)}")

    def items_per_source(self) -> int:
        if self.backlog:
            return self.backlog
        return max(200, math.ceil(1.3 * 1500 * self.minutes * 60 / self.sources))


@dataclass
class Sample:
    t: float
    landed: dict[str, int]
    backlog: int
    staged: int
    uncleaned: int
    records: int

    @property
    def total(self) -> int:
        return sum(self.landed.values())


@dataclass
class LoadTestResult:
    config: LoadTestConfig
    seconds: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    processes: dict[str, dict[str, float]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    killed: dict[str, Any] = field(default_factory=dict)
    flow_runs: dict[str, str] = field(default_factory=dict)  # via Prefect: worker -> state
    killed_at: float | None = None  # wall-clock time of the kill
    sim_lag_ms: dict[int, float] = field(default_factory=dict)  # second -> simulator loop lag
    sim_gc: dict[str, list[float]] = field(default_factory=dict)  # its GcPauses
    sim_polls_failed: int = 0  # stats requests the simulator did not answer in time
    sim_reniced: bool = False  # whether the simulator ran ahead of the others (root only)


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
        try:
            if pool is not None:
                others["prefect-server"] = UsageProbe(pool.start(), tree=True)
            _run(rt, cfg, result, workers, clean, pool, sim, sources, arrivals, others)
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
            for p in (*workers, clean, *others.values()):
                p.sample()
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
        for w in workers:
            w.wait(FINAL_WAIT_S)
        _sim_arrivals(sim, arrivals, result)
        drain = _drain(conn, clean, cfg.drain_limit_s)
        clean.wait(5)
        result.seconds = fetch_seconds
        _summarize(result, conn, workers, clean, sources, arrivals, drain)
        for name, probe in others.items():
            result.processes[name] = _usage(probe.usage)


def _loop_figures(w: ChildProcess) -> dict[str, float | None]:
    """Batches in flight (throughput = requests in flight / latency) and how late its
    event loop ran, over the worker's progress lines after its first staged page."""
    lines = [ln for ln in w.lines if "in_flight" in ln and ln.get("landed")]
    if not lines:
        return {"mean_in_flight": None, "mean_loop_lag_ms": None, "max_loop_lag_ms": None}
    lags = [float(ln.get("loop_lag_ms", 0.0)) for ln in lines]
    return {"mean_in_flight": round(sum(int(ln["in_flight"]) for ln in lines) / len(lines), 1),
            "mean_loop_lag_ms": round(sum(lags) / len(lags), 1),
            "max_loop_lag_ms": round(max(lags), 1)}


def _usage(usage: Usage) -> dict[str, float]:
    return {"cpu_percent": round(usage.cpu_percent, 1), "peak_rss_mb": round(usage.peak_rss_mb, 1)}


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


def _summarize(result: LoadTestResult, conn: psycopg.Connection[Any],
               workers: list[ChildProcess], clean: ChildProcess, sources: Path,
               arrivals: dict[str, dict[int, int]], drain: dict[str, Any]) -> None:
    overall = LatencyHistogram()
    reasons: Counter[str] = Counter()
    fetched = ok = 0
    for w in workers:
        f = w.final or {}
        h = LatencyHistogram.from_json(f.get("latency") or {})
        overall.merge(h)
        landed = int(f.get("landed") or (w.latest().get("landed", 0)))
        if w.killed:  # its last progress line predates flushes it committed before the kill
            landed = max(landed, audit.staged(conn, w.name))
        w_fetched = int(f.get("fetched") or w.latest().get("fetched", 0))
        w_ok = int(f.get("ok", 0)) + int(f.get("not_modified", 0))
        reasons.update(f.get("reasons") or {})
        fetched += int(f.get("fetched", 0))
        ok += w_ok
        first = next((ln["at"] for ln in w.lines if "t" in ln), None)
        result.workers[w.name] = {
            "killed": w.killed, "landed": landed, "fetched": w_fetched,
            "started_after_s": round(first - w.started_at, 1) if first and w.started_at
            else None,
            "pages_per_s": round(landed / max(w.usage.wall_seconds, 1e-9), 1),
            "success_rate": round(w_ok / int(f["fetched"]), 4) if f.get("fetched") else None,
            "mean_latency_ms": _r(h.mean_ms), "p99_latency_ms": _r(h.quantile_ms(0.99)),
            "staging_flushes": f.get("flushes"), "staging_flush_s": f.get("flush_seconds"),
            **_loop_figures(w)}
    for p in (*workers, clean):
        result.processes[p.name] = _usage(p.usage)
    injected = sum(n for r, n in reasons.items() if r in INJECTED)
    staged_in_run = audit.staged(conn)
    dup = audit.staged_twice(conn)
    rates = {e["id"]: float(e["rate"]) for e in yaml.safe_load(sources.read_text())["sources"]}
    # A second holds at most ``rate`` turns (turns are >= 1/rate apart); one more is allowed
    # for a request whose turn was at the end of the previous second and that arrived late.
    over = [(sid, sec) for sid, per in arrivals.items() for sec, n in per.items()
            if n > math.floor(rates.get(sid, math.inf)) + 1]
    violations = len(over)
    # Arrivals are stamped when the simulator's handler runs: after a stall of its own
    # loop, requests that came during it are stamped in one second.
    lag = result.sim_lag_ms
    in_sim_stalls = sum(1 for _, sec in over if lag.get(sec, 0.0) >= SIM_STALL_MS)
    peak = max((n / rates.get(sid, math.inf) for sid, per in arrivals.items()
                for n in per.values()), default=0.0)
    killed = result.killed
    if killed:
        ids = killed["leased"]
        rows = audit.fates(conn, ids, killed["worker"])
        leased, queued = ("LEASED", "FETCHING"), ("PENDING", "RETRY_WAIT")
        fates: Counter[str] = Counter()
        for state, owner, other, staged in rows:
            if other:
                fates["refetched_by_others"] += 1
            elif state in queued or (state in leased and worker_of(owner or "") != killed["worker"]):
                fates["still_queued"] += 1   # or leased to a living worker, not yet fetched
            elif state in leased:
                fates["held_by_dead_worker"] += 1
            elif (state == "SUCCEEDED" and staged) or state == "FAILED":
                fates["finished_before_the_kill"] += 1
            elif state == "REDUNDANT":   # a variant of a queued URL (a learned URL rule)
                fates["redundant"] += 1
            # else: done without a staged page — lost
        killed["leased"] = len(ids)
        for fate in ("refetched_by_others", "still_queued", "held_by_dead_worker",
                     "finished_before_the_kill", "redundant"):
            killed[fate] = fates[fate]
        killed["lost"] = len(ids) - sum(fates.values())
    total_landed = sum(w["landed"] for w in result.workers.values())
    window = _fetch_window(result.samples, result.config.minutes * 60)
    recovery = _recovery(result.samples, killed.get("at_s") if killed else None)
    result.figures = {
        "loadtest_pages_per_s": window[0],
        "window_s": window[1], "pages_per_s_whole_run": round(total_landed / result.seconds, 1),
        "loadtest_success_rate": round(ok / fetched, 4) if fetched else None,
        "loadtest_success_rate_excl_injected": round(ok / (fetched - injected), 4)
        if fetched > injected else None,
        "loadtest_duplicate_fetches": int(dup),
        "loadtest_rate_violations": violations,
        "rate_violations_in_sim_stalls": in_sim_stalls,
        "sim_loop_lag_max_ms": max(lag.values(), default=0.0),
        "sim_seconds_stalled": sum(1 for v in lag.values() if v >= SIM_STALL_MS),
        "sim_gc": result.sim_gc, "sim_stats_polls_failed": result.sim_polls_failed,
        "sim_reniced": result.sim_reniced,
        "loadtest_peak_rate_ratio": round(peak, 3),
        "mean_latency_ms": _r(overall.mean_ms), "p99_latency_ms": _r(overall.quantile_ms(0.99)),
        "pages_landed": total_landed, "staging_rows": int(staged_in_run),
        "records": audit.records(conn),
        "staging_backlog_at_end": drain["backlog_at_end"], "cleaning_left": drain["left"],
        "cleaning_drain_s": drain["drain_s"],
        "max_uncleaned": max((s.uncleaned for s in result.samples), default=0),
        "rate_recovered_after_kill": recovery, "reasons": dict(reasons.most_common(8)),
        "seed": SEED_FIGURES}


def _fetch_window(samples: list[Sample], deadline: float) -> tuple[float, float]:
    """(pages/s, seconds) from the first staged page to the workers' deadline: the
    fetching itself, without process start-up and the drain of the last batches."""
    inside = [s for s in samples if s.t <= deadline]
    first = next((i for i, s in enumerate(inside) if s.total), None)
    if first is None or len(inside) - first < 2:
        return 0.0, 0.0
    a = inside[max(first - 1, 0)]
    b = inside[-1]
    return round((b.total - a.total) / (b.t - a.t), 1), round(b.t - a.t, 1)


def _recovery(samples: list[Sample], kill_at: float | None) -> float | None:
    """Throughput in the minute after the kill's lease time vs the minute before the kill."""
    if kill_at is None:
        return None

    def rate(a: float, b: float) -> float | None:
        inside = [s for s in samples if a <= s.t <= b]
        if len(inside) < 2:
            return None
        return (inside[-1].total - inside[0].total) / (inside[-1].t - inside[0].t)

    before = rate(kill_at - 60, kill_at)
    after = rate(kill_at + 90, kill_at + 150)
    return round(after / before, 3) if before and after is not None else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def result_json(result: LoadTestResult) -> str:
    return json.dumps({"config": result.config.__dict__, "seconds": round(result.seconds, 1),
                       "figures": result.figures, "workers": result.workers,
                       "processes": result.processes, "killed": result.killed,
                       "flow_runs": result.flow_runs}, indent=2)
