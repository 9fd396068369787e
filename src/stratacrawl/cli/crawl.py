"""``stratacrawl crawl``, ``stratacrawl submit`` and ``stratacrawl url-rules``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
import uvloop
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from stratacrawl.cli.common import (
    JSON,
    SOURCES,
    bad_input,
    console,
    emit_json,
    fail,
    find_sources,
    fitted_table,
    load_sources_file,
    run,
    settings,
    sources_path,
)
from stratacrawl.errors import StratacrawlError
from stratacrawl.process.signals import StopSignals

if TYPE_CHECKING:   # (imported where used: `--help` does not load the crawler)
    from stratacrawl.cold.url_rules import CanonicalCounts, RuleRow
    from stratacrawl.crawl import CrawlReport
    from stratacrawl.frontier.discovery import DiscoveryStats


def report_table(report: CrawlReport) -> Table:
    table = Table(title=f"crawl: {report.fetched} pages in {report.seconds:.1f} s")
    for col in ("source", "fetched", "ok", "304", "failed", "mean ms", "top reasons",
                "retried (faults)"):
        table.add_column(col)
    for sid, s in report.sources.items():
        reasons = ", ".join(f"{k} {v}" for k, v in s.reasons.most_common(3))
        retried = ", ".join(f"{k} {v}" for k, v in s.retries.most_common(3))
        table.add_row(sid, str(s.fetched), str(s.ok), str(s.not_modified), str(s.failed),
                      f"{s.mean_latency_ms:.0f}", reasons, retried or "-")
    captions = []
    redundant = [f"{sid} {s.redundant}" for sid, s in report.sources.items() if s.redundant]
    if redundant:   # duplicate URLs a learned rule caught after they were queued
        captions.append("not fetched, redundant by a learned URL rule: " + ", ".join(redundant))
    held = [f"{sid} {s.held}" for sid, s in report.sources.items() if s.held]
    if held:        # variants whose rule was undecided, claimed and given back for a while
        captions.append("variants held back until their URL rule was decided (times): "
                        + ", ".join(held))
    waiting = [f"{sid} {s.over_budget}" for sid, s in report.sources.items() if s.over_budget]
    if waiting:     # re-fetches past the source's daily budget
        captions.append("re-fetches left for tomorrow (daily budget): " + ", ".join(waiting))
    if captions:
        table.caption = "\n".join(captions)
    return table


def rules_table(rows: list[RuleRow], pins: list[dict[str, str]],
                width: int | None = None) -> Table:
    """The learned and configured URL rules, fitted to the terminal (``fitted_table``):
    source ids and rule names whole, the example URLs in the rest (the first and last
    seen times give way first in a narrow terminal)."""
    body = [[r.source_id, f"{r.rule}\n({r.state})", f"{r.support} / {r.counterexamples}",
             f"{r.first_seen:%m-%d %H:%M}\n{r.last_seen:%m-%d %H:%M}",
             "\n".join(u for u in (r.example or "").split() if u != "=")] for r in rows]
    body += [[p["source_id"], f"{p['rule']}\n({p['state']})", "", "", ""] for p in pins]
    return fitted_table(f"{len(rows)} learned URL rule(s)",
                        ["source", "rule (state)", "for/against", "seen", "example"], body,
                        elastic=4, width=width, droppable=(3,))


def crawl_cmd(
    sources: Path | None = SOURCES,
    until_idle: bool = typer.Option(True, "--until-idle/--forever",
                                    help="Stop when no work is due (default) or keep going."),
    seconds: float | None = typer.Option(None, help="Stop after this many seconds."),
    worker_id: str | None = typer.Option(None, help="This worker's name (default: random)."),
    as_json: bool = typer.Option(False, "--json", help="JSON lines: progress every second, "
                                 "then the whole report (for the load test and scripts)."),
) -> None:
    """Run discovery and fetch until no work is due, with a progress line."""
    from stratacrawl.crawl import CrawlReport, crawl
    from stratacrawl.process.tuning import tune_crawl_process
    from stratacrawl.progress import every, with_json_progress
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources)
    signals = StopSignals(graceful=True)   # SIGTERM or SIGINT: drain, land, report

    async def main() -> CrawlReport:
        tune_crawl_process()
        report = CrawlReport()
        async with open_app(settings()) as comps:
            crawling = crawl(comps, parsed, until_idle=until_idle, seconds=seconds,
                             worker_id=worker_id, report=report, stop=signals.event)
            if as_json:
                return await with_json_progress(crawling, report)
            with Live(console=console, refresh_per_second=4, transient=True) as live:
                def progress(r: CrawlReport) -> None:
                    live.update(f"fetched {r.fetched} · queued {r.discovery.queued} · "
                                f"staged {r.writer.landed if r.writer else 0}")
                ticker = asyncio.create_task(every(1.0, lambda _lag: progress(report)))
                try:
                    return await crawling
                finally:
                    ticker.cancel()

    report = run(main(), signals)   # (a second signal stops it at once: exit 130/143)
    if not as_json:  # (with --json the report was the last JSON line)
        console.print(report_table(report))
        dropped = ", ".join(f"{k} {v}" for k, v in report.discovery.dropped.most_common())
        console.print(f"discovered {report.discovery.queued} new URLs; dropped: "
                      f"{dropped or 'none'}")
        for d in report.spool.damaged if report.spool else []:
            console.print(f"[yellow]spool: {escape(d.file)} set aside in "
                          f"{escape(d.moved_to)}[/]: {escape(d.reason)}")
    if signals.signum:   # stopped by a signal: its conventional code, after the report
        sys.exit(signals.exit_code)


def submit_cmd(
    source: str = typer.Option(..., "--source", help="Source id."),
    urls: list[str] = typer.Argument(..., help="URLs to crawl urgently."),
    sources: Path | None = SOURCES,
) -> None:
    """Urgent URLs for a source: ahead of every scheduled task, fetched even if known."""
    from stratacrawl.sources import load_sources
    from stratacrawl.wiring import open_app

    try:
        src = load_sources(sources_path(sources)).get(source)
    except KeyError as e:
        bad_input(str(e).strip('"'))
    except StratacrawlError as e:
        fail(e)
        raise

    async def main() -> DiscoveryStats:
        async with open_app(settings()) as comps:
            stats = await comps.discovery.submit(src, urls)
        return stats

    try:
        stats = uvloop.run(main())
    except StratacrawlError as e:
        fail(e)
    console.print(f"queued {stats.queued} urgent URL(s) for {source}")
    if stats.dropped:
        refused = ", ".join(f"{reason} {n}" for reason, n in stats.dropped.most_common())
        bad_input(f"refused {sum(stats.dropped.values())} of {len(urls)} URL(s): {refused}")


def url_rules_cmd(
    source: str | None = typer.Argument(None, help="Only this source."),
    sources: Path | None = SOURCES,
    as_json: bool = JSON,
) -> None:
    """The learned URL equivalence rules (per source: state, support, counterexamples,
    first and last seen), and the rules the sources file pins or forbids."""
    from stratacrawl.cold.url_rules import load_canonical_counts, load_rules
    from stratacrawl.sources import load_sources
    from stratacrawl.wiring import open_app

    configured: dict[str, tuple[list[str], list[str]]] = {}
    sources = find_sources(sources)   # (its pinned and forbidden rules)
    if sources is not None and sources.exists():
        try:
            for s in load_sources(sources).sources:
                configured[s.id] = (s.url_rules.pin, s.url_rules.forbid)
        except StratacrawlError as e:
            fail(e)
    if source is not None and configured and source not in configured:
        bad_input(f"unknown source {source!r} (the sources file has "
                  f"{', '.join(sorted(configured))})")

    async def main() -> tuple[list[RuleRow], dict[str, CanonicalCounts]]:
        async with open_app(settings()) as comps:
            return (await load_rules(comps.pool, source),
                    await load_canonical_counts(comps.pool, source))

    rows, canonicals = run(main())
    pins = [{"source_id": sid, "rule": r, "state": state}
            for sid, (pinned, forbidden) in sorted(configured.items())
            if source is None or sid == source
            for state, rules in (("pinned", pinned), ("forbidden", forbidden)) for r in rules]
    if as_json:
        emit_json({"learned": rows, "configured": pins, "canonical_links": canonicals})
        return
    console.print(rules_table(rows, pins))
    for sid, c in canonicals.items():   # rel=canonical links met while learning
        console.print(f"{sid}: rel=canonical links used {c.used}; ignored: off-host "
                      f"{c.off_host}, to a missing page {c.missing}, in a loop {c.looped}",
                      soft_wrap=False)   # (wrapped at the terminal's width, at spaces)
