"""A load test's figures, from what its workers reported and what the tiers hold after it:
pages/s over the fetching window, success rates (with and without the faults the
simulator injects), rate violations per source-second from the simulator's arrival
counts, what became of the killed worker's tasks, duplicates, the cleaning drain."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import yaml

from stratacrawl.cold import run_audit as audit
from stratacrawl.cold.runs import worker_of
from stratacrawl.loadtest.processes import ChildProcess, Usage
from stratacrawl.loadtest.result import LoadTestResult, Sample
from stratacrawl.monitor.histogram import LatencyHistogram

# What the simulator injects as a real site's normal noise; failures for these reasons are
# the simulated web's, not the crawler's (success rate is also reported with them).
INJECTED = ("http-500", "http-502", "http-503", "http-504", "connection-reset",
            "transport-error")
SIM_STALL_MS = 100.0  # a simulator second whose loop ran this late stamped arrivals late
SEED_FIGURES = {"pages_per_s": 1500, "success_rate": 0.992, "mean_latency_ms": 1800,
                "p99_latency_ms": 3500}


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


def usage_figures(usage: Usage) -> dict[str, float]:
    return {"cpu_percent": round(usage.cpu_percent, 1), "peak_rss_mb": round(usage.peak_rss_mb, 1)}


def _workers(result: LoadTestResult, conn: psycopg.Connection[Any],
             workers: list[ChildProcess]) -> tuple[LatencyHistogram, Counter[str], int, int]:
    """Each worker's figures into ``result.workers``; returns the merged latency, the final
    outcome reasons, pages fetched and fetched successfully (304s included)."""
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
    return overall, reasons, fetched, ok


def _politeness(arrivals: dict[str, dict[int, int]], sources: Path,
                lag: dict[int, float]) -> tuple[int, int, float]:
    """(source-seconds over the source's rate, how many of those fell in a simulator
    stall, the peak arrivals ÷ rate). A second holds at most ``rate`` turns (turns are
    >= 1/rate apart); one more is allowed for a request whose turn was at the end of the
    previous second and that arrived late. Arrivals are stamped when the simulator's
    handler runs: after a stall of its own loop, requests that came during it are stamped
    in one second."""
    rates = {e["id"]: float(e["rate"]) for e in yaml.safe_load(sources.read_text())["sources"]}
    over = [(sid, sec) for sid, per in arrivals.items() for sec, n in per.items()
            if n > math.floor(rates.get(sid, math.inf)) + 1]
    in_sim_stalls = sum(1 for _, sec in over if lag.get(sec, 0.0) >= SIM_STALL_MS)
    peak = max((n / rates.get(sid, math.inf) for sid, per in arrivals.items()
                for n in per.values()), default=0.0)
    return len(over), in_sim_stalls, peak


FATES = ("refetched_by_others", "still_queued", "held_by_dead_worker",
         "finished_before_the_kill", "redundant")


def _killed_tasks(conn: psycopg.Connection[Any], killed: dict[str, Any]) -> None:
    """What became of each task the killed worker held (counts into ``killed``); a task
    done without a staged page is lost."""
    ids = killed["leased"]
    leased, queued = ("LEASED", "FETCHING"), ("PENDING", "RETRY_WAIT")
    fates: Counter[str] = Counter()
    for state, owner, other, staged in audit.fates(conn, ids, killed["worker"]):
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
    killed["leased"] = len(ids)
    for fate in FATES:
        killed[fate] = fates[fate]
    killed["lost"] = len(ids) - sum(fates.values())


def summarize(result: LoadTestResult, conn: psycopg.Connection[Any],
              workers: list[ChildProcess], clean: ChildProcess, sources: Path,
              arrivals: dict[str, dict[int, int]], drain: dict[str, Any]) -> None:
    """``result.figures`` (and its workers, processes and killed worker) of a finished run."""
    overall, reasons, fetched, ok = _workers(result, conn, workers)
    for p in (*workers, clean):
        result.processes[p.name] = usage_figures(p.usage)
    injected = sum(n for r, n in reasons.items() if r in INJECTED)
    lag = result.sim_lag_ms
    violations, in_sim_stalls, peak = _politeness(arrivals, sources, lag)
    killed = result.killed
    if killed:
        _killed_tasks(conn, killed)
    total_landed = sum(w["landed"] for w in result.workers.values())
    window = _fetch_window(result.samples, result.config.minutes * 60)
    result.figures = {
        "loadtest_pages_per_s": window[0],
        "window_s": window[1], "pages_per_s_whole_run": round(total_landed / result.seconds, 1),
        "loadtest_success_rate": round(ok / fetched, 4) if fetched else None,
        "loadtest_success_rate_excl_injected": round(ok / (fetched - injected), 4)
        if fetched > injected else None,
        "loadtest_duplicate_fetches": audit.staged_twice(conn),
        "loadtest_rate_violations": violations,
        "rate_violations_in_sim_stalls": in_sim_stalls,
        "sim_loop_lag_max_ms": max(lag.values(), default=0.0),
        "sim_seconds_stalled": sum(1 for v in lag.values() if v >= SIM_STALL_MS),
        "sim_gc": result.sim_gc, "sim_stats_polls_failed": result.sim_polls_failed,
        "sim_reniced": result.sim_reniced,
        "loadtest_peak_rate_ratio": round(peak, 3),
        "mean_latency_ms": _r(overall.mean_ms), "p99_latency_ms": _r(overall.quantile_ms(0.99)),
        "pages_landed": total_landed, "staging_rows": audit.staged(conn),
        "records": audit.records(conn),
        "staging_backlog_at_end": drain["backlog_at_end"], "cleaning_left": drain["left"],
        "pages_cleaned": audit.cleaned(conn),
        "cleaning_drain_s": drain["drain_s"],
        "max_uncleaned": max((s.uncleaned for s in result.samples), default=0),
        "rate_recovered_after_kill": _recovery(result.samples,
                                               killed.get("at_s") if killed else None),
        "reasons": dict(reasons.most_common(8)), "seed": SEED_FIGURES}


TARGET_PAGES_PER_S = 1500   # the rate the load test is measured against (3 nodes)


def cpu_per_page(result: LoadTestResult, cpu_s: dict[str, float]) -> None:
    """``result.cpu_ms_per_page`` from each component's CPU seconds over the run, and the
    cores ``TARGET_PAGES_PER_S`` needs at that cost (hardware sizing: the figure scales
    with the rate, since every component's work is per page).

    A cleaner that had not caught up when the drain limit ran out did only part of the
    run's work: its row is its CPU per page cleaned times every page it had to clean
    (``figures["cleaner_scaled"]`` says from how many), so the total is what the run costs
    with every page cleaned rather than what one niced cleaner got through."""
    pages = max(1, sum(int(w["landed"]) for w in result.workers.values()))
    cleaned = int(result.figures.get("pages_cleaned") or 0)
    left = int(result.figures.get("cleaning_left") or 0)
    if "cleaner" in cpu_s and cleaned and left:
        cpu_s = {**cpu_s, "cleaner": cpu_s["cleaner"] * (cleaned + left) / cleaned}
        result.figures["cleaner_scaled"] = {"cleaned": cleaned, "left": left}
    result.cpu_ms_per_page = {k: round(v / pages * 1000, 3) for k, v in cpu_s.items()}
    total = sum(result.cpu_ms_per_page.values())
    result.figures["cpu_ms_per_page"] = round(total, 3)
    # from the figure as reported, so the two agree to the last digit shown (from the
    # unrounded total they differed by 0.1 where the total sat on a rounding boundary)
    result.figures["cores_for_target_rate"] = round(
        result.figures["cpu_ms_per_page"] * TARGET_PAGES_PER_S / 1000, 1)


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
