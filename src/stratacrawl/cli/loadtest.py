"""``stratacrawl loadtest``: N worker processes against the simulated web, measured."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import typer

from stratacrawl.cli.common import console, fail, settings
from stratacrawl.errors import StratacrawlError
from stratacrawl.loadtest.result import VIAS, LoadTestConfig

LOADTEST_REDIS_DB = 5


Via = StrEnum("Via", {v: v for v in VIAS})  # type: ignore[misc]


def loadtest_cmd(
    workers: int = typer.Option(3, min=1, help="Crawl worker processes."),
    sources: int = typer.Option(200, min=1, max=5000, help="Simulated sources."),
    minutes: float = typer.Option(10.0, min=0.1, help="How long the workers fetch."),
    rate: float = typer.Option(12.0, min=0.1, help="Per-source request limit (requests/s)."),
    max_batches: int = typer.Option(1000, min=1, help="Batches in flight per worker."),
    kill: bool = typer.Option(True, help="kill -9 one worker halfway (needs 2+ workers)."),
    via: Via = typer.Option(
        "processes", help="processes: `stratacrawl crawl` processes; prefect: a Prefect "
        "server, a process work pool, one Prefect worker per host running the fetch "
        "deployment, and the cleaning deployment beside them."),
    redis_cluster: int = typer.Option(
        0, min=0, max=16, help="Run the hot tier on an embedded Redis Cluster of this many "
        "nodes (0: the configured or embedded single Redis)."),
    out: Path | None = typer.Option(None, help="Report folder (default: <state>/loadtest/<time>)."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """The load test on scratch tiers (its own database, Redis DB and indices):
    simulator with ~1.8 s latency, N workers, a cleaner, one worker killed halfway;
    a Markdown report and a PNG chart land in the report folder."""
    cfg = LoadTestConfig(workers=workers, sources=sources, minutes=minutes, rate=rate,
                         max_batches=max_batches, kill_at=0.5 if kill else None,
                         via=via.value, redis_cluster=redis_cluster)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = out or settings().state_path / "loadtest" / stamp
    # (imported here, not with the module: `--help` does not load the harness)
    from stratacrawl.loadtest.report import ARTIFACT_KEY, publish_artifact, write_report
    from stratacrawl.loadtest.run import run_loadtest
    from stratacrawl.scratch import scratch_runtime

    try:
        with scratch_runtime("loadtest", LOADTEST_REDIS_DB, redis_cluster=redis_cluster) as rt:
            result = run_loadtest(rt, cfg, folder)
    except StratacrawlError as e:   # another load test running; a tier that cannot start
        fail(e)
    md, png = write_report(result, folder)
    if api := publish_artifact(md):
        console.print(f"report published as the artifact {ARTIFACT_KEY!r} on {api}")
    if as_json:
        print(json.dumps(result.figures))
    else:
        console.print(md.read_text())
        console.print(f"report: {md}  chart: " + (str(png) if png else
                      "none (install the charts extra: pip install 'stratacrawl[charts]')"))
    if result.failed:
        for who, why in result.failed.items():
            console.print(f"[red]loadtest failed[/red] — {who}: {why}")
        raise typer.Exit(1)
