"""``stratacrawl trace``, ``ops``, ``metrics serve``, ``monitor``, ``inspect``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from stratacrawl.cli.common import (
    EXIT_FAILED,
    JSON,
    SOURCES,
    bad_input,
    console,
    emit_json,
    find_sources,
    fitted_table,
    load_sources_file,
    run,
    settings,
)
from stratacrawl.cli.help import group

if TYPE_CHECKING:   # (imported where used: `--help` stays quick)
    from stratacrawl.monitor.evaluate import Evaluation

metrics_app = group("Prometheus metrics.")


def trace_cmd(source: str = typer.Argument(..., help="Source id."),
              n: int = typer.Option(20, "-n", help="How many requests (at most 100)."),
              as_json: bool = JSON) -> None:
    """The last requests of a source: time, URL, status, latency, bytes, error, worker."""
    from stratacrawl.hot import live
    from stratacrawl.wiring import open_app

    found = find_sources(None)
    if found is not None:   # an id the sources file lacks is bad input, its ids named
        load_sources_file(found, source)

    async def main() -> list[dict[str, object]]:
        async with open_app(settings()) as c:
            return await live.trace(c.redis, source, n)

    rows = run(main())
    if as_json:
        emit_json(rows)
        return
    console.print(trace_table(source, rows))


def trace_table(source: str, rows: list[dict[str, object]], width: int | None = None) -> Table:
    """A source's last requests, newest first, fitted to the terminal (``fitted_table``):
    every field whole, the URL in the rest — whole when it fits, else shortened in the
    middle (host and last segment kept) and wrapped after a "/" (the worker, then the
    byte count, give way first in a narrow terminal)."""
    body = [[str(t["at"])[11:19], str(t["url"]), str(t.get("status") or ""), str(t["ms"]),
             str(t["bytes"]), str(t.get("error") or ""), str(t.get("worker") or "")]
            for t in rows]
    return fitted_table(f"{source}: last {len(rows)} requests",
                        ["time", "URL", "status", "ms", "bytes", "error", "worker"], body,
                        elastic=1, width=width, droppable=(4, 6))


def _serve(sources: Path | None, port: int, evaluate_every: float | None, what: str) -> None:
    from stratacrawl.monitor.web import serve
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources)
    s = settings()

    async def main() -> None:
        async with open_app(s) as c:
            console.print(f"{what} on http://127.0.0.1:{port}/ (Data Docs under /docs/; "
                          "Ctrl-C stops)")
            await serve(c.redis, c.pool, parsed, port=port, evaluate_every_s=evaluate_every,
                        hold_s=s.alert_hold_s, docs_dir=s.data_docs_path)

    run(main())


def ops_cmd(sources: Path | None = SOURCES, port: int = typer.Option(8090, help="Port on 127.0.0.1.")
            ) -> None:
    """A read-only ops page: sources, status, success, backlog, alerts, validation, traces."""
    _serve(sources, port, None, "ops page")


@metrics_app.command("serve")
def metrics_serve(sources: Path | None = SOURCES,
                  port: int = typer.Option(None, help="Port (default STRATACRAWL_METRICS_PORT)."),
                  evaluate_every: float = typer.Option(
                      60.0, help="Evaluate the alert rules every N seconds (0: never).")) -> None:
    """/metrics in the Prometheus format (the ops page too), evaluating alert rules."""
    _serve(sources, port or settings().metrics_port, evaluate_every or None, "metrics")


def monitor_cmd(sources: Path | None = SOURCES, as_json: bool = JSON) -> None:
    """Evaluate the alert rules once: what fires, what is pending, what resolved; exit 1
    while an alert condition holds (fired or pending)."""
    from stratacrawl.monitor.evaluate import evaluate
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources)
    s = settings()

    async def main() -> Evaluation:
        async with open_app(s) as c:
            return await evaluate(c.redis, c.pool, parsed, hold_s=s.alert_hold_s)

    ev = run(main())
    if as_json:
        emit_json({
            "fired": [{"source": sid, **asdict(f), "alert_id": aid} for sid, f, aid in ev.fired],
            "pending": [{"source": sid, **asdict(f), "held_s": round(held, 1)}
                        for sid, f, held in ev.pending],
            "resolved": [{"source": sid, "rule": rule} for sid, rule in ev.resolved]})
    else:
        for _, f, alert_id in ev.fired:   # (a finding's message names its source)
            console.print(f"[red]FIRED[/] {f.level} {f.rule} {escape(f.message)} "
                          f"(alert {alert_id})")
        for _, f, held in ev.pending:
            console.print(f"pending {f.level} {f.rule} {escape(f.message)} "
                          f"(held {held:.0f} s)")
        for sid, rule in ev.resolved:
            console.print(f"[green]resolved[/] {rule} {escape(sid)}")
        if not (ev.fired or ev.pending or ev.resolved):
            console.print("no alert condition")
    if ev.fired or ev.pending:
        raise typer.Exit(EXIT_FAILED)


def alert_rules_cmd(
    sources: Path | None = SOURCES,
    fmt: str = typer.Option("prometheus", "--format", help="Only prometheus for now."),
    out: Path | None = typer.Option(None, "--out", help="File (default: standard output)."),
    hold_s: float | None = typer.Option(None, "--for-seconds", help="The rules' for: "
                                        "(default STRATACRAWL_ALERT_HOLD_S, 180)."),
) -> None:
    """The alert rules as a Prometheus rules file (thresholds per source from the sources
    file), for a Prometheus that scrapes `stratacrawl metrics serve`."""
    from stratacrawl.monitor.prom_rules import rules_document

    if fmt != "prometheus":
        bad_input(f"--format: {fmt!r} is not a known format; have: prometheus")
    parsed = load_sources_file(sources)
    hold = settings().alert_hold_s if hold_s is None else hold_s
    text = yaml.safe_dump(rules_document(parsed, hold), sort_keys=False, width=1000)
    if out is None:
        print(text, end="")
    else:
        out.write_text(text)
        console.print(f"wrote the rules of {len(parsed.sources)} source(s) to {out}")


def inspect_cmd(as_json: bool = JSON) -> None:
    """The weekly inspection now; writes the Markdown report under the state folder."""
    from stratacrawl.monitor.inspection import inspect
    from stratacrawl.wiring import open_app

    s = settings()

    async def main() -> Path:
        async with open_app(s) as c:
            return await inspect(c.pool, s.state_path / "inspection")

    path = run(main())
    if as_json:
        emit_json({"report": path, "markdown": path.read_text()})
        return
    console.print(f"inspection report: {path}")
