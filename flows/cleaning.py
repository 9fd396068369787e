"""cleaning: staged pages → records (per-source rules or article extraction), the pages
cleaned last checked against each source's suite as they land (a collapse is a P1 alert),
format errors counted per source, anomalies raised when they jump."""

from __future__ import annotations

from datetime import date

from prefect import flow
from prefect.states import Failed, State

from flows.common import emit, flow_sources, load_settings, publish_table, step
from stratacrawl.clean.parallel import default_processes
from stratacrawl.process.tuning import tune_long_running
from stratacrawl.wiring import open_app


@flow(name="cleaning", log_prints=True)
async def cleaning(sources_file: str | None = None, minutes: float = 4.0,
                   reclean_source: str | None = None,
                   reclean_day: date | None = None,
                   follow: bool = False,
                   processes: int | None = None) -> dict[str, dict[str, int]] | State:
    """Clean for ``minutes`` at most (``follow``: keep waiting for new pages until then,
    beside running fetches) in ``processes`` cleaner processes (default: one per core
    of the worker's host but one, left to fetching; at least one); with
    ``reclean_source`` and ``reclean_day``, re-clean that source-day first (after a rule
    fix: records are replaced, never duplicated)."""
    tune_long_running()
    async with open_app(await load_settings(sources=sources_file)) as comps:
        sources = flow_sources(comps.settings, reclean_source=reclean_source)
        reset = 0
        if reclean_source and reclean_day:
            reset = await step(f"reclean {reclean_source} {reclean_day}", lambda: comps.cleaner(
                sources).reclean(reclean_source, reclean_day))
        # the minute-level integrity check's alerts are Prefect events as they fire
        report = await step("clean staged pages", lambda: comps.clean(
            sources, seconds=minutes * 60, follow=follow,
            processes=processes or default_processes(), notify=emit))
    s = report.stats
    per_source = {sid: {"pages": v.pages, "records": v.records, "format_errors": v.format_errors}
                  for sid, v in s.sources.items()}
    rows = []
    for sid in sorted(set(per_source) | set(report.states)):
        v = per_source.get(sid, {"pages": 0, "records": 0, "format_errors": 0})
        rows.append({"source": sid, **v, "staged_24h_by_state": ", ".join(
            f"{k} {n}" for k, n in report.states.get(sid, {}).items()),
            "anomaly": sid in report.anomalies})
    await publish_table("stratacrawl-cleaning",
                        f"Cleaning: {s.pages} pages, new records {s.inserted}, updated "
                        f"{s.updated}, replaced {s.replaced}, from the parse cache {s.cache_hits}"
                        + (f"; re-cleaned {reset} page(s) of {reclean_source} on {reclean_day}"
                           if reset else ""), rows)
    if report.anomalies:   # format errors jumped: the run says so, not only an alert
        failing = [f"{sid}: {per_source.get(sid, {}).get('format_errors', 0)} format errors of "
                   f"{per_source.get(sid, {}).get('pages', 0)} pages (a format anomaly)"
                   for sid in sorted(report.anomalies)]
        return Failed(message="; ".join(failing), data=per_source)
    return per_source
