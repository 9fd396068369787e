"""``stratacrawl sim serve|truth``: the site simulator."""

from __future__ import annotations

import asyncio
import json
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
import uvloop
import yaml

from stratacrawl.cli.common import SOURCES, bad_input, console, fail, load_sources_file
from stratacrawl.cli.help import group

app = group("The site simulator: a realistic web on loopback.")


def _epoch(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        bad_input(f"--epoch: expected an ISO date-time, got {text!r}")
        raise
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@app.command()
def serve(
    sources: int = typer.Option(5, min=1, max=5000, help="Number of sources."),
    seed: int = typer.Option(7, help="Same seed, same site."),
    epoch: str | None = typer.Option(None, help="ISO time of the site's epoch (default: now, "
                                                "floored to 10 minutes)."),
    first_host: int = typer.Option(10, help="First source on 127.0.0.<first-host>."),
    port: int = typer.Option(0, help="First port (each source adds one); 0 = any free port."),
    noise: bool = typer.Option(False, help="Realistic noise: ~1.6 s latency, some 5xx."),
    rate_limit: float | None = typer.Option(None, help="429 past this many requests/s per source."),
    backlog: int | None = typer.Option(None, min=1, help="Items each source has at its epoch."),
    oversized_rate: float | None = typer.Option(None, min=0, max=1,
                                                help="Share of 1-5 MB item pages (default 0.005)."),
    write_sources: Path | None = typer.Option(None, help="Write a sources.yaml for these sources."),
    truth_file: Path | None = typer.Option(None, help="Write the ground truth here on exit."),
    cadence: str = typer.Option("10m", help="The written sources' cadence (lists fetched "
                                "again at least this often)."),
    max_interval: str | None = typer.Option(None, help="The written sources' longest "
                                            "re-crawl interval (default: a day)."),
    alert_min_requests: int | None = typer.Option(
        None, min=1, help="Requests the written sources' rate alerts need (default 20)."),
    as_json: bool = typer.Option(False, "--json", help="Announce sources as one JSON line."),
) -> None:
    """Serve the simulated sources until SIGINT/SIGTERM."""
    from stratacrawl.process.tuning import tune_long_running
    from stratacrawl.sim import Simulator, build_specs
    from stratacrawl.sim.crawl_config import sources_document

    specs = build_specs(sources, seed, epoch=_epoch(epoch), first_host=first_host,
                        ports=[port + i for i in range(sources)] if port else None, noise=noise)
    for s in specs:
        if rate_limit is not None:
            s.behaviour.rate_limit = rate_limit
        if backlog is not None:
            s.backlog = backlog
        if oversized_rate is not None:
            s.behaviour.oversized_rate = oversized_rate
    sim = Simulator(specs)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        tune_long_running()  # a full collection pausing the loop would bunch its arrivals
        await sim.start()
        if write_sources:
            document = yaml.safe_dump(sources_document(
                specs, cadence=cadence, max_interval=max_interval,
                alert_min_requests=alert_min_requests), sort_keys=False)
            await asyncio.to_thread(write_sources.write_text, document)
        if as_json:
            print(json.dumps({"ready": True, "sources": [
                {"id": s.id, "kind": s.kind, "url": s.base_url} for s in specs]}), flush=True)
        else:
            for s in specs:
                console.print(f"{s.id:<14} {s.kind:<9} {s.base_url}")
            console.print("serving; Ctrl-C stops")
        await stop.wait()
        if truth_file:
            sim.write_truth(str(truth_file))
        await sim.stop()

    uvloop.run(main())


@app.command("truth")
def truth_cmd(
    sources: int = typer.Option(5, min=1), seed: int = typer.Option(7),
    epoch: str = typer.Option(..., help="The epoch the site was served with (ISO)."),
    at: str | None = typer.Option(None, help="ISO time (default: now)."),
    first_host: int = typer.Option(10), port: int = typer.Option(..., help="First port."),
    out: Path | None = typer.Option(None, help="File to write (default: stdout)."),
) -> None:
    """The ground truth (every published item and its fields), computed without a server."""
    from stratacrawl.sim import build_specs
    from stratacrawl.sim.content import truth

    specs = build_specs(sources, seed, epoch=_epoch(epoch), first_host=first_host,
                        ports=[port + i for i in range(sources)])
    now = _epoch(at) or datetime.now(UTC)
    doc = json.dumps({"at": now.isoformat(), "sources": {s.id: truth(s, now) for s in specs}})
    if out:
        out.write_text(doc)
    else:
        print(doc)


# What --slow, --redesign and --stop do to a simulated source, and what --fix sets.
BREAKS = {
    "slow": "answers take ~4 s (latency alerts: 2x the hour before)",
    "redesign": "pages keep answering 200 but lose their structure (format anomaly, "
                "completeness checks)",
    "stop": "the site stops publishing new items (freshness checks)",
}
FIXED = {"error_rate": 0.0, "retry_after_503": 2.0, "latency_median_ms": 0.0,
         "redesign": False, "publishing": True}


@app.command("break")
def break_cmd(
    source: str = typer.Argument(..., help="The simulated source (its id in the sources file)."),
    errors: float | None = typer.Option(None, min=0.0, max=1.0,
                                        help="Share of requests answered 5xx (1.0: all; no "
                                             "Retry-After, so no hold)."),
    slow: bool = typer.Option(False, "--slow", help=BREAKS["slow"] + ".", show_default=False),
    redesign: bool = typer.Option(False, "--redesign", help=BREAKS["redesign"] + ".",
                                  show_default=False),
    stop: bool = typer.Option(False, "--stop", help=BREAKS["stop"] + ".", show_default=False),
    fix: bool = typer.Option(False, "--fix", help="Undo every break of the source.",
                             show_default=False),
    sources: Path | None = SOURCES,
) -> None:
    """Break a source of a running simulator (`sim serve`, `up --demo`) to see the alerts
    and failed runs it causes; --fix mends it."""
    import httpx

    values: dict[str, object] = dict(FIXED) if fix else {}
    if errors is not None:
        values.update(error_rate=errors, retry_after_503=None)
    if slow:
        values["latency_median_ms"] = 4000.0
    if redesign:
        values["redesign"] = True
    if stop:
        values["publishing"] = False
    if not values:
        bad_input("say how to break it: --errors SHARE, --slow, --redesign, --stop (or --fix)")
    seed = load_sources_file(sources, only=source).get(source).seeds[0]
    parts = httpx.URL(seed)
    control = f"{parts.scheme}://{parts.host}:{parts.port}/_sim/control"
    try:
        answer = httpx.post(control, json=values, timeout=10)
    except httpx.HTTPError as e:
        fail(f"{source}: no simulator answers at {control} ({e})")
        raise
    if answer.status_code != 200:
        fail(f"{source}: {control} answered {answer.status_code}: {answer.text[:200]}")
    state = answer.json()["behaviour"]
    if "publishing" in values:
        state["publishing"] = values["publishing"]
    if fix:
        console.print(f"{source}: mended — {describe(state)}. The next fetch runs see it; "
                      "its alerts resolve once their conditions clear.")
    else:
        console.print(f"{source}: broken — {describe(state)}. The next fetch runs see it; "
                      "an alert fires once its condition held for STRATACRAWL_ALERT_HOLD_S.")


def describe(behaviour: dict[str, Any]) -> str:
    """A simulated source's behaviour as a person reads it."""
    errors = float(behaviour.get("error_rate") or 0.0)
    latency = float(behaviour.get("latency_median_ms") or 0.0)
    said = [f"{errors:.0%} of answers 5xx",
            f"answers in ~{latency / 1000:g} s" if latency else "usual latency",
            "pages redesigned (fields missing)" if behaviour.get("redesign") else "usual layout"]
    if "publishing" in behaviour:
        said.append("publishing new items" if behaviour["publishing"] else "no new items")
    return ", ".join(said)
