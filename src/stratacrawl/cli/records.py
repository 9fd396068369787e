"""``stratacrawl clean``, ``validate``, ``export``, ``expectations init``, ``alerts``: the
data half of the pipeline, from staged pages to checked records and out."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from stratacrawl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    JSON,
    SOURCES,
    bad_input,
    console,
    emit_json,
    err,
    find_sources,
    load_sources_file,
    run,
    settings,
)
from stratacrawl.cli.help import group

if TYPE_CHECKING:  # the engines are imported by the command that runs them (`--help` is quick)
    from stratacrawl.clean.run import CleanReport
    from stratacrawl.cold.validation_results import DayVerdict
    from stratacrawl.validate.runner import SuiteResult

expectations_app = group("The Great Expectations project.")


def clean_table(report: CleanReport) -> Table:
    s = report.stats
    table = Table(title=f"clean: {s.pages} pages in {s.seconds:.1f} s, {s.inserted} new records, "
                        f"{s.updated} updated, {s.replaced} replaced, {s.cache_hits} from cache")
    for col in ("source", "pages", "records", "format errors", "reasons", "24 h by state"):
        table.add_column(col)
    for sid in sorted(set(s.sources) | set(report.states)):
        st = s.sources.get(sid)
        reasons = ", ".join(f"{k} {v}" for k, v in st.reasons.most_common(2)) if st else ""
        states = ", ".join(f"{k} {v}" for k, v in report.states.get(sid, {}).items())
        table.add_row(sid + (" [red](anomaly)[/]" if sid in report.anomalies else ""),
                      str(st.pages if st else 0), str(st.records if st else 0),
                      str(st.format_errors if st else 0), reasons, states)
    return table


def clean_cmd(
    sources: Path | None = SOURCES,
    source: str | None = typer.Option(None, "--source", help="Only this source."),
    day: str | None = typer.Option(None, "--day", help="With --reclean: the day (YYYY-MM-DD)."),
    reclean: bool = typer.Option(False, "--reclean",
                                 help="Re-clean the source-day (after a rule fix)."),
    seconds: float | None = typer.Option(None, help="Stop after this many seconds."),
    follow: bool = typer.Option(False, help="Keep waiting for new pages (until --seconds)."),
    processes: int | None = typer.Option(
        None, "--processes", min=1,
        help="Cleaner processes (default: one per core but one, at least one)."),
    as_json: bool = JSON,
) -> None:
    """Clean staged pages into records; --reclean --source S --day D redoes a source-day."""
    from stratacrawl.clean.parallel import default_processes
    from stratacrawl.process.tuning import tune_long_running
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources, source)
    if reclean and (source is None or day is None):
        bad_input("--reclean needs --source and --day")
    workers = processes or default_processes()
    when = _day(day) if day else None

    async def main() -> tuple[int, CleanReport]:
        tune_long_running()
        async with open_app(settings()) as comps:
            reset = 0
            if reclean and source and when:
                reset = await comps.cleaner(parsed).reclean(source, when)
            report = await comps.clean(parsed, seconds=seconds,
                                       source_ids=[source] if source else None, follow=follow,
                                       processes=workers)
            return reset, report

    reset, report = run(main())
    if as_json:
        emit_json({"recleaned_pages": reset, **asdict(report)})
        return
    if reclean:
        console.print(f"re-cleaning {reset} page(s) of {source} on {when}")
    console.print(clean_table(report))


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        bad_input(f"not a day (YYYY-MM-DD): {text!r}")
        raise


def results_table(results: list[SuiteResult]) -> Table:
    table = Table(title="validation")
    for col in ("source", "day", "result", "checks", "count basis", "not passing", "Data Docs"):
        table.add_column(col)
    for r in results:
        other = "; ".join(c.describe() for c in r.checks if c.status != "pass")
        table.add_row(r.source_id, str(r.day), "[green]pass[/]" if r.success else "[red]FAIL[/]",
                      f"{sum(c.success for c in r.checks)}/{len(r.checks)}", r.count_basis,
                      other, r.data_docs or "")
    return table


def validate_cmd(
    sources: Path | None = SOURCES,
    source: str | None = typer.Option(None, "--source", help="Only this source."),
    day: str | None = typer.Option(None, "--day", help="Day to check (default: today, UTC)."),
    days: int = typer.Option(1, "--days", help="Check this many days back, ending --day."),
    as_json: bool = JSON,
) -> None:
    """Run each source-day's checkpoint of the GX project; exit 1 if a check fails, 2 if one
    could not run (a suite naming a column the source lacks)."""
    from stratacrawl.validate.runner import days_back
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources, source)
    chosen = [parsed.get(source)] if source else parsed.sources
    day_list = days_back(days, _day(day) if day else None)

    async def main() -> list[SuiteResult]:
        s = settings()
        async with open_app(s) as comps:
            return await comps.validator().validate(chosen, day_list)

    results = run(main())
    if as_json:
        emit_json({"success": all(r.success for r in results), "results": results})
    else:
        console.print(results_table(results))
    if any(c.status == "error" for r in results for c in r.checks):
        raise typer.Exit(EXIT_BAD_INPUT)
    if not all(r.success for r in results):
        raise typer.Exit(EXIT_FAILED)


def export_cmd(
    source: str = typer.Option(..., "--source", help="Source id."),
    since: str = typer.Option(..., "--since", help="First day (YYYY-MM-DD)."),
    until: str | None = typer.Option(None, "--until", help="Last day (default: all)."),
    fmt: str = typer.Option("jsonl", "--format", help="csv, parquet or jsonl."),
    out: Path | None = typer.Option(None, "--out", help="File (default: standard output)."),
    include_failed: bool = typer.Option(
        False, "--include-failed", help="Also the days whose last validation failed."),
    sources: Path | None = SOURCES,
) -> None:
    """Records of a source since a day, for downstream use. Days whose last validation
    failed are held back (named, with their failed checks) unless --include-failed."""
    from stratacrawl.cold.validation_results import day_verdicts
    from stratacrawl.export import export_records
    from stratacrawl.wiring import open_app

    found = find_sources(sources)   # (the field types; without a file, as stored)
    types = load_sources_file(found, source).get(source).field_types if found else {}
    first, last = _day(since), _day(until) if until else None

    async def main() -> tuple[int, list[DayVerdict]]:
        async with open_app(settings()) as comps:
            verdicts = await day_verdicts(comps.pool, source, first, last)
            held = [] if include_failed else [v for v in verdicts.values() if not v.success]
            n = await export_records(comps.pool, source_id=source, since=first, until=last,
                                     fmt=fmt, out=out, field_types=types,  # type: ignore[arg-type]
                                     skip_days=[v.day for v in held])
            return n, held

    n, held = run(main())
    for v in held:
        err.print(f"held back {source} {v.day}: its last validation failed "
                  f"({', '.join(v.failed) or 'see Data Docs'}); --include-failed exports it")
    if out is not None:
        console.print(f"exported {n} record(s) of {source} to {out}"
                      + (f", {len(held)} failed day(s) held back" if held else ""))


@expectations_app.command("init")
def expectations_init(
    sources: Path | None = SOURCES,
    overwrite: bool = typer.Option(False, help="Rewrite every source's objects and suite."),
) -> None:
    """Write the GX objects (query asset, suite, validation definition, checkpoint) of every
    source the project lacks into expectations/gx, and this host's folders into its
    uncommitted config variables."""
    from stratacrawl.validate.project import (
        config_path,
        open_project,
        write_config_variables,
        write_source,
    )
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources)
    s = settings()

    def write(database_url: str) -> tuple[int, Path]:
        context = open_project(s, database_url)  # a new project's data source is checked
        wrote = 0
        for source in parsed.sources:
            written = write_source(context, source, overwrite=overwrite)
            if written:
                wrote += 1
                console.print(f"{source.id}: wrote {', '.join(written)}")
        return wrote, write_config_variables(context, s)

    async def main() -> tuple[int, Path]:
        async with open_app(s) as comps:
            return await asyncio.to_thread(write, comps.runtime.database_url)

    wrote, variables = run(main())
    console.print(f"{wrote} source(s) written, {len(parsed.sources) - wrote} kept, "
                  f"in {config_path(s).parent}; folders in {variables}")


SEVERITY_LEVEL = {"critical": "P1", "warning": "P2", "info": "P3"}


def alerts_cmd(kind: str | None = typer.Option(None, help="Only this kind."),
               as_json: bool = JSON) -> None:
    """Open alerts (format anomalies, failed checks), newest first."""
    from stratacrawl.cold.alerts import open_alerts
    from stratacrawl.wiring import open_app

    async def main() -> None:
        async with open_app(settings()) as comps:
            alerts = await open_alerts(comps.pool, kind)
        if as_json:
            emit_json(alerts)
            return
        table = Table(title=f"{len(alerts)} open alert(s)")
        for col in ("raised", "level", "kind", "source", "message"):
            table.add_column(col)
        for a in alerts:   # levels as everywhere else (P0-P3); old rows by their severity
            level = a.level or SEVERITY_LEVEL.get(a.severity, a.severity)
            table.add_row(f"{a.raised_at:%Y-%m-%d %H:%M}", level, a.kind, a.source_id or "",
                          a.message)
        console.print(table)

    run(main())
