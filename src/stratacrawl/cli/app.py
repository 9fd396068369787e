"""Assembles the command groups."""

from __future__ import annotations

from typing import Any

import typer
import typer.main

from stratacrawl.cli import (
    bench,
    crawl,
    demo,
    docs,
    doctor,
    extract,
    loadtest,
    monitor,
    records,
    repair,
    services,
    sim,
    sources,
    stack,
    tiers,
)
from stratacrawl.cli.help import conventional_hints, group
from stratacrawl.process.logs import configure

app = group(add_completion=False, pretty_exceptions_enable=False,
            help="Stratacrawl: a crawl data platform on Redis, Elasticsearch and PostgreSQL.")


@app.callback()
def _logging() -> None:
    """Structured logs to standard error (STRATACRAWL_LOG_LEVEL, default WARNING)."""
    configure()


app.add_typer(services.app, name="services")
app.add_typer(sources.app, name="sources")
app.add_typer(sim.app, name="sim")
app.add_typer(docs.app, name="docs")
app.add_typer(extract.app, name="extract")
app.command("doctor")(doctor.doctor)
app.command("demo")(demo.demo)
app.command("up")(stack.up)
app.command("down")(stack.down)
app.command("bench")(bench.bench)
app.command("crawl")(crawl.crawl_cmd)
app.command("loadtest")(loadtest.loadtest_cmd)
app.command("submit")(crawl.submit_cmd)
app.command("url-rules")(crawl.url_rules_cmd)
app.command("clean")(records.clean_cmd)
app.command("validate")(records.validate_cmd)
app.command("export")(records.export_cmd)
app.command("alerts")(records.alerts_cmd)
app.command("repair")(repair.repair_cmd)
app.add_typer(records.expectations_app, name="expectations")
app.command("lookup")(tiers.lookup_cmd)
app.command("recover")(tiers.recover_cmd)
app.command("demote")(tiers.demote_cmd)
app.command("sink")(tiers.sink_cmd)
app.command("compensate")(tiers.compensate_cmd)
app.command("trace")(monitor.trace_cmd)
app.command("ops")(monitor.ops_cmd)
app.command("monitor")(monitor.monitor_cmd)
app.command("inspect")(monitor.inspect_cmd)
app.command("alert-rules")(monitor.alert_rules_cmd)
app.add_typer(monitor.metrics_app, name="metrics")


def command() -> Any:
    """The command tree as it runs: built from ``app``, hints in their conventional form."""
    return conventional_hints(typer.main.get_command(app))
