"""fetch: claim due batches, fetch politely, land raw pages in staging with ledger updates."""

from __future__ import annotations

from prefect import flow

from flows.common import publish, runtime, step
from stratacrawl.crawl import CrawlReport, crawl
from stratacrawl.progress import with_json_progress
from stratacrawl.sources import load_sources
from stratacrawl.tuning import tune_crawl_process


@flow(name="fetch", log_prints=True)
async def fetch(sources_file: str | None = None, minutes: float = 5.0,
                until_idle: bool = True, worker_id: str | None = None,
                json_lines: bool = False) -> dict[str, dict[str, float]]:
    """One worker's fetch run: ``minutes`` at most, or until nothing is due. ``worker_id``
    names its leases and staging rows (default: random); ``json_lines`` prints the
    progress lines of ``stratacrawl crawl --json`` (the load test reads them)."""
    tune_crawl_process()
    async with runtime(sources=sources_file) as (rt, comps):
        sources = load_sources(rt.settings.sources)
        report = CrawlReport()

        async def fetch_loop() -> CrawlReport:  # the hot loop: one task run, not one a page
            run = crawl(comps, sources, until_idle=until_idle, seconds=minutes * 60,
                        worker_id=worker_id, report=report)
            return await (with_json_progress(run, report) if json_lines else run)

        report = await step("fetch loop", fetch_loop)
    per_source = {sid: {"fetched": s.fetched, "ok": s.ok, "not_modified": s.not_modified,
                        "failed": s.failed, "mean_ms": round(s.mean_latency_ms, 1)}
                  for sid, s in report.sources.items()}
    await publish("stratacrawl-fetch", f"Fetch: {report.fetched} pages in {report.seconds:.0f} s",
                  ["| source | fetched | ok | 304 | failed | mean ms |",
                   "| --- | --- | --- | --- | --- | --- |",
                   *(f"| {k} | {v['fetched']} | {v['ok']} | {v['not_modified']} | {v['failed']} | "
                     f"{v['mean_ms']} |" for k, v in per_source.items())])
    return per_source
