"""The load test's Markdown report and its chart (throughput and backlog over time),
also published as a Prefect artifact."""

from __future__ import annotations

import itertools
import logging
import os
from pathlib import Path

import httpx

from stratacrawl.loadtest.result import LoadTestResult, result_json
from stratacrawl.loadtest.run import SIM_STATS_TIMEOUT_S
from stratacrawl.loadtest.summary import TARGET_PAGES_PER_S

log = logging.getLogger(__name__)
ARTIFACT_KEY = "stratacrawl-loadtest"


def chart(result: LoadTestResult, path: Path) -> Path | None:
    """The chart as a PNG, or None without matplotlib (the ``charts`` extra: a runtime
    dependency of this one chart only)."""
    try:
        import matplotlib
    except ImportError:
        return None

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    samples = result.samples
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    names = sorted({n for s in samples for n in s.landed})
    for name in [None, *names]:
        xs, ys = [], []
        for a, b in itertools.pairwise(samples):
            da = b.total - a.total if name is None else b.landed.get(name, 0) - a.landed.get(
                name, 0)
            xs.append(b.t)
            ys.append(da / (b.t - a.t))
        top.plot(xs, ys, label=name or "all workers", linewidth=2 if name is None else 1)
    top.axhline(1500, color="grey", linestyle="--", linewidth=1, label="seed: 1,500 pages/s")
    if result.killed:
        for ax in (top, bottom):
            ax.axvline(result.killed["at_s"], color="red", linestyle=":",
                       label=f"kill -9 {result.killed['worker']}")
    top.set_ylabel("pages staged per second")
    top.legend(loc="lower right", fontsize=8)
    top.grid(alpha=0.3)
    ts = [s.t for s in samples]
    bottom.plot(ts, [s.backlog for s in samples], label="frontier backlog (tasks due or leased)")
    bottom.plot(ts, [s.uncleaned for s in samples], label="staging backlog (not yet cleaned)")
    bottom.set_xlabel("seconds")
    bottom.set_ylabel("tasks / pages")
    bottom.legend(loc="upper right", fontsize=8)
    bottom.grid(alpha=0.3)
    fig.suptitle(f"load test: {result.config.workers} workers, {result.config.sources} sources, "
                 f"{result.config.minutes:g} min")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _gc(pauses: dict[str, list[float]]) -> str:
    if not pauses:
        return "not reported"
    return f"{int(sum(pauses['count']))}, {max(pauses['max_ms'])}"


def markdown(result: LoadTestResult, chart_name: str | None = "loadtest.png") -> str:
    f, cfg = result.figures, result.config
    seed = f["seed"]
    lines = [
        f"# Load test: {cfg.workers} workers, {cfg.sources} sources, {cfg.minutes:g} minutes",
        "",
        ("Workers: Prefect workers of a process work pool, each running a `fetch` flow run "
         f"(flow-run states: {', '.join(f'{k} {v}' for k, v in result.flow_runs.items())}); "
         "cleaning as a `cleaning` flow run on a worker of its own." if cfg.via == "prefect"
         else "Workers: `stratacrawl crawl` processes; cleaning: `stratacrawl clean --follow`."),
        "",
        (f"Hot tier: a Redis Cluster of {cfg.redis_cluster} nodes." if cfg.redis_cluster
         else "Hot tier: one Redis.") + (
            " Simulator niced ahead of the workers (it stands for remote sites)."
            if f.get("sim_reniced") else " Simulator at the workers' priority."),
        "",
        *([f"**Failed** — {who}: {why}" for who, why in result.failed.items()] + [""]
          if result.failed else []),
        "| figure | ours | reference deployment (3 nodes) | target |",
        "|---|---|---|---|",
        f"| pages/s fetched and staged | {f['loadtest_pages_per_s']:,} | {seed['pages_per_s']:,} "
        "| ≥ 1,500 |",
        f"| success rate (excluding injected faults) | {f['loadtest_success_rate_excl_injected']}"
        f" | {seed['success_rate']} | ≥ 0.99 |",
        f"| success rate (all) | {f['loadtest_success_rate']} | | |",
        f"| mean latency ms | {f['mean_latency_ms']} | {seed['mean_latency_ms']} | |",
        f"| p99 latency ms | {f['p99_latency_ms']} | {seed['p99_latency_ms']} | |",
        f"| duplicate fetches | {f['loadtest_duplicate_fetches']} | | 0 |",
        f"| rate violations (source-seconds over the limit) | {f['loadtest_rate_violations']} "
        "| | 0 |",
        f"| of them in a second the simulator's own loop stalled ≥ 100 ms (stamped late) "
        f"| {f['rate_violations_in_sim_stalls']} | | |",
        f"| peak arrivals / limit, any source-second | {f['loadtest_peak_rate_ratio']} | | |",
        f"| simulator loop lag: max ms, seconds ≥ 100 ms | {f['sim_loop_lag_max_ms']}, "
        f"{f['sim_seconds_stalled']} | | |",
        f"| simulator collections (all generations): count, max ms | {_gc(f['sim_gc'])} | | |",
        f"| simulator stats requests unanswered within {SIM_STATS_TIMEOUT_S:.0f} s "
        f"(asked again a minute later) | {f['sim_stats_polls_failed']} | | |",
        "",
        f"Staged {f['staging_rows']:,} pages, {f['records']:,} records cleaned during the run "
        f"and the drain; the largest staging backlog was {f['max_uncleaned']:,} pages, "
        f"{f['staging_backlog_at_end']:,} at the end, "
        + (f"drained in {f['cleaning_drain_s']} s." if f["cleaning_drain_s"] is not None else
           f"{f['cleaning_left']:,} still waiting when the drain limit ran out."),
        "",
    ]
    if result.killed:
        k = result.killed
        lines += [
            f"**kill -9 of {k['worker']} at {k['at_s']} s** while it held {k['leased']} leased "
            f"tasks: {k['refetched_by_others']} fetched by the other workers, "
            f"{k['still_queued']} queued again, {k.get('finished_before_the_kill', 0)} landed by "
            f"it before the kill, {k.get('redundant', 0)} found redundant (a learned URL "
            f"rule), {k['held_by_dead_worker']} still leased to it "
            f"(lease not yet expired), lost {k['lost']}. Throughput 90-150 s after the kill vs "
            f"the minute before: {f['rate_recovered_after_kill']}."
            + (f" Its flow run was marked Crashed {k['flow_run_crashed_after_s']} s after the "
               "kill (missed heartbeats, the server's automation)."
               if k.get("flow_run_crashed_after_s") is not None else
               " Its flow run was not marked Crashed in time." if "flow_run_crashed_after_s"
               in k else ""),
            ""]
    lines += ["## Workers", "", "| worker | pages | pages/s | success | mean ms | p99 ms | "
              "batches in flight (mean) | event-loop lag ms (mean / max) |",
              "|---|---|---|---|---|---|---|---|"]
    for name, w in result.workers.items():
        lines.append(f"| {name}{' (killed)' if w['killed'] else ''} | {w['landed']:,} | "
                     f"{w['pages_per_s']} | {w['success_rate']} | {w['mean_latency_ms']} | "
                     f"{w['p99_latency_ms']} | {w.get('mean_in_flight')} | "
                     f"{w.get('mean_loop_lag_ms')} / {w.get('max_loop_lag_ms')} |")
    lines += _processes_section(result)
    lines += ["", f"Fetch outcomes by reason (workers that reported): {f['reasons']}", ""]
    if chart_name:
        lines += [f"![throughput and backlog]({chart_name})", ""]
    return "\n".join(lines)


def _processes_section(result: LoadTestResult) -> list[str]:
    """The processes' CPU and memory, and the CPU each component spent per page."""
    lines = ["", "## Processes", "", "| process | CPU % of one core (mean) | peak RSS MB |",
             "|---|---|---|"]
    for name, p in result.processes.items():
        lines.append(f"| {name} | {p['cpu_percent']} | {p['peak_rss_mb']} |")
    if not result.cpu_ms_per_page:
        return lines
    f = result.figures
    lines += ["", "## CPU per page", "",
              "CPU milliseconds per landed page, over the run and the cleaning drain "
              "(storage servers read from the OS when they run on this host):", "",
              "| component | CPU ms per page |", "|---|---|"]
    lines += [f"| {name} | {ms} |" for name, ms in result.cpu_ms_per_page.items()]
    lines += [f"| **all** | **{f.get('cpu_ms_per_page', 0.0)}** |", ""]
    if scaled := f.get("cleaner_scaled"):
        done, left = scaled["cleaned"], scaled["left"]
        lines += [f"The cleaner had cleaned {done:,} pages when the drain limit ran out, "
                  f"{left:,} still waiting: its row is its CPU per page cleaned times all "
                  f"{done + left:,}.", ""]
    lines += [f"At this cost, {TARGET_PAGES_PER_S:,} pages/s needs about "
              f"{f.get('cores_for_target_rate')} cores of this machine's speed in all."]
    return lines


def publish_artifact(md: Path, api_url: str | None = None) -> str | None:
    """The report as a Markdown artifact on the Prefect API in use (``PREFECT_API_URL``,
    e.g. ``stratacrawl up``'s); returns that API, or None when there is none to reach."""
    api_url = api_url or os.environ.get("PREFECT_API_URL")
    if not api_url:
        return None
    try:
        resp = httpx.post(f"{api_url.rstrip('/')}/artifacts/", timeout=10, json={
            "key": ARTIFACT_KEY, "type": "markdown", "data": md.read_text(),
            "description": f"stratacrawl load test ({md.parent.name})"})
        resp.raise_for_status()
    except httpx.HTTPError as e:
        log.warning("loadtest: report not published to %s: %s", api_url, e)
        return None
    return api_url


def write_report(result: LoadTestResult, out: Path) -> tuple[Path, Path | None]:
    png = chart(result, out / "loadtest.png")
    md = out / "loadtest.md"
    md.write_text(markdown(result, png.name if png else None))
    (out / "loadtest.json").write_text(result_json(result))
    return md, png
