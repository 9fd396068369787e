"""``stratacrawl lookup``, ``recover``, ``sink``, ``compensate``: the tiers by hand."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from stratacrawl.cli.common import (
    EXIT_FAILED,
    EXIT_TIER,
    JSON,
    SOURCES,
    console,
    emit_json,
    fail,
    find_sources,
    run,
    settings,
)
from stratacrawl.errors import StratacrawlError

if TYPE_CHECKING:   # (imported by the command that runs: `--help` stays quick)
    from stratacrawl.tiers.compensation import SourceCompensation
    from stratacrawl.tiers.demotion import DemoteStats
    from stratacrawl.tiers.lookup import URLFacts
    from stratacrawl.tiers.recovery import RecoveryReport
    from stratacrawl.tiers.sinking import SinkReport


def lookup_cmd(url: str = typer.Argument(..., help="A URL (any form: it is canonicalized)."),
               as_json: bool = JSON) -> None:
    """What the tiers know about a URL, and which tier answered."""
    from stratacrawl.tiers.lookup import lookup
    from stratacrawl.wiring import open_app

    async def main() -> URLFacts | None:
        async with open_app(settings()) as c:
            return await lookup(url, hot=c.hot_urls, warm=c.warm, pool=c.pool)

    facts = run(main())
    if as_json:
        emit_json({"url": url, "found": facts is not None} if facts is None else {
            "url": url, "found": True, **facts.same_facts(), "tier": facts.tier,
            "in_hot": facts.in_hot})
        if facts is None:
            raise typer.Exit(EXIT_FAILED)
        return
    if facts is None:
        fail(f"unknown URL: {url}")
    for k, v in facts.same_facts().items():
        console.print(f"{k:<14} {v}")
    # Which tier answered, and whether hot also holds the URL's state (its validators and
    # last access): "tier warm" beside "in_hot True" read as a contradiction.
    console.print(f"{'answered by':<14} {facts.tier}")
    console.print(f"{'also in hot':<14} " + ("yes (validators, last access)" if facts.in_hot
                                            else "no"))


def recover_cmd(as_json: bool = JSON) -> None:
    """Rebuild hot (and warm, if empty) from cold; safe to run at any time."""
    from stratacrawl.wiring import open_app

    async def main() -> RecoveryReport:
        async with open_app(settings()) as c:
            return await c.recovery().run()

    report = run(main())
    if as_json:
        emit_json({**asdict(report), "resumed_after_s": report.resumed_after_s})
        return
    for line in report.lines():
        console.print(line)
    console.print(f"recovered in {report.seconds:.2f} s; fetching could resume after "
                  f"{report.resumed_after_s:.2f} s")


def demote_cmd(as_json: bool = JSON) -> None:
    """Demote committed fetches to warm now (what the `demotion` deployment runs)."""
    from stratacrawl.tiers.demotion import demote
    from stratacrawl.wiring import open_app

    s = settings()

    async def main() -> DemoteStats:
        async with open_app(s) as c:
            return await demote(c.pool, c.warm)

    r = run(main())
    if as_json:
        emit_json(r)
        if r.error:
            raise typer.Exit(EXIT_TIER)
        return
    if r.busy:
        console.print("another process is demoting; nothing done here")
        return
    console.print(f"demoted {r.rows} URL states ({r.docs} warm documents)")
    if r.error:
        fail(f"demotion stopped: {r.error} (the watermark stays; run it again later)",
             EXIT_TIER)


def sink_cmd(sources: Path | None = SOURCES, as_json: bool = JSON) -> None:
    """The nightly sinking now: warm → cold, empty weeks, weeks ahead, staging and ledger
    retention."""
    from stratacrawl.sources import snapshot_source_ids
    from stratacrawl.wiring import open_app

    s = settings()
    found = find_sources(sources)
    try:
        snapshots = snapshot_source_ids(found) if found else []
    except StratacrawlError as e:
        fail(e)
        raise

    async def main() -> SinkReport:
        async with open_app(s) as c:
            return await c.sink(snapshot_sources=snapshots)

    r = run(main())
    if as_json:
        emit_json(r)
        return
    console.print(f"demoted (backfill) {r.demoted.rows}; hot access written back "
                  f"{r.access_written_back}; warm → cold {r.warm_deleted} documents, "
                  f"{r.warm_refreshed} refreshed; indices dropped {len(r.indices_dropped)}, "
                  f"created {len(r.indices_created)}; staging partitions dropped "
                  f"{len(r.staging_dropped)} ({r.snapshot_rows} pages kept as snapshots); "
                  f"finished tasks retired {r.tasks_retired}")
    for step, seconds in r.steps.items():
        console.print(f"  {step}: {seconds:.2f} s")


def compensate_cmd(after_h: float | None = typer.Option(
        None, "--after-hours", help="Overdue threshold (default STRATACRAWL_COMPENSATE_AFTER_H)."),
                   as_json: bool = JSON) -> None:
    """Re-schedule overdue tasks, release parked batches, reclaim expired leases."""
    from stratacrawl.tiers.compensation import compensate
    from stratacrawl.wiring import open_app

    s = settings()

    async def main() -> dict[str, SourceCompensation]:
        async with open_app(s) as c:
            return await compensate(c.frontier, overdue_after=timedelta(
                hours=after_h if after_h is not None else s.compensate_after_h))

    report = run(main())
    if as_json:
        emit_json(dict(sorted(report.items())))
        return
    table = Table(title="compensation")
    for col in ("source", "reclaimed", "rescheduled", "released", "re-queued", "unfinished",
                "failed 24 h"):
        table.add_column(col)
    for sid, r in sorted(report.items()):
        table.add_row(sid, str(r.reclaimed), str(r.rescheduled), str(r.released), str(r.requeued),
                      ", ".join(f"{k}: {v}" for k, v in sorted(r.unfinished.items())),
                      str(r.failed_24h))
    console.print(table)
