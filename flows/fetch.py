"""fetch: claim due batches, fetch politely, land raw pages in staging with ledger updates.

While the hot loop runs (one task run: a task per request or batch would cost more than
it shows), the run page shows a progress artifact (share of the time budget spent; 100 %
when the run ends, idle or not) and, each minute, the per-source table so far."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Failed, State

from flows.common import Progress, flow_sources, load_settings, publish_table, step
from stratacrawl.crawl import CrawlReport, crawl
from stratacrawl.crawl.verdict import failing_sources
from stratacrawl.process.signals import StopSignals
from stratacrawl.process.tuning import tune_crawl_process
from stratacrawl.progress import with_json_progress
from stratacrawl.wiring import open_app

TABLE_KEY = "stratacrawl-fetch"
PROGRESS_EVERY_S = 10.0
TABLE_EVERY_S = 60.0


def source_rows(report: CrawlReport) -> list[dict[str, Any]]:
    rows = []
    for sid, s in sorted(report.sources.items()):
        rate, held = report.throttled.get(sid, (None, 0.0))
        rows.append({"source": sid, "fetched": s.fetched, "ok": s.ok,
                     "not_modified": s.not_modified, "failed": s.failed,
                     "mean_ms": round(s.mean_latency_ms, 1),
                     "retries": sum(s.retries.values()),
                     "throttled_rate": None if rate is None else round(rate, 2),
                     "held_s": round(held, 1)})
    return rows


async def report_while_running(report: CrawlReport, progress: Progress,
                               budget_s: float) -> None:
    t0 = last_table = time.monotonic()
    while True:
        await progress((time.monotonic() - t0) / budget_s)
        if time.monotonic() - last_table >= TABLE_EVERY_S and report.sources:
            last_table = time.monotonic()
            await publish_table(TABLE_KEY, f"Fetch so far: {report.fetched} pages",
                                source_rows(report))
        await asyncio.sleep(PROGRESS_EVERY_S)


@flow(name="fetch", log_prints=True)
async def fetch(sources_file: str | None = None, minutes: float = 5.0,
                until_idle: bool = True, worker_id: str | None = None,
                json_lines: bool = False) -> dict[str, dict[str, float]] | State:
    """One worker's fetch run: ``minutes`` at most, or until nothing is due. ``worker_id``
    names its leases and staging rows (default: random); ``json_lines`` prints the
    progress lines of ``stratacrawl crawl --json`` (the load test reads them)."""
    tune_crawl_process()
    async with open_app(await load_settings(sources=sources_file)) as comps:
        sources = flow_sources(comps.settings)
        report = CrawlReport()
        progress = Progress(f"fetch run: share of its {minutes:g} min budget spent")

        async def fetch_loop() -> tuple[CrawlReport, list[str]]:
            """The crawl, and the sources that failed in it (a source another run is
            fetching is not this run's failure)."""
            run = crawl(comps, sources, until_idle=until_idle, seconds=minutes * 60,
                        worker_id=worker_id, report=report, stop=signals.event)
            reporter = asyncio.create_task(report_while_running(report, progress, minutes * 60))
            try:
                done = await (with_json_progress(run, report) if json_lines else run)
            finally:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
            still_due = await comps.ledger.sources_left_waiting(sources.ids)
            return done, failing_sources(done, sources, still_due)

        def failed(outcome: tuple[CrawlReport, list[str]]) -> str | None:
            failing = outcome[1]
            return (f"{len(failing)} of {len(sources.sources)} source(s) failed: "
                    + "; ".join(failing)) if failing else None

        # A cancellation (the worker sends SIGTERM) or Ctrl-C stops the crawl as it stops
        # `stratacrawl crawl`: in-flight pages land, the rest goes back to the queue. Then
        # Prefect's own handler gets the signal and ends the run its way.
        signals = StopSignals(graceful=True)
        with signals.installed():
            report, failing = await step("fetch loop", fetch_loop, fails=failed)
        signals.pass_on()
        await progress(1.0)
    rows = source_rows(report)
    await publish_table(TABLE_KEY, f"Fetch: {report.fetched} pages in {report.seconds:.0f} s",
                        rows)
    result = {r["source"]: {k: v for k, v in r.items() if k in {
        "fetched", "ok", "not_modified", "failed", "mean_ms"}} for r in rows}
    # The run's state tells the truth about the work: a source that failed its fetches
    # fails the run (and its "fetch loop" task), its reasons in the state message.
    if why := failed((report, failing)):
        get_run_logger().error("fetch run failed: %s", "; ".join(failing))
        return Failed(message=why, data=result)
    return result
