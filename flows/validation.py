"""validation: Great Expectations checkpoints per source and day; Data Docs, history in
PostgreSQL, an alert and a failed run when a check fails."""

from __future__ import annotations

import functools
from datetime import date

from prefect import flow

from flows.common import publish, runtime, step
from stratacrawl.errors import ValidationFailed
from stratacrawl.sources import load_sources
from stratacrawl.validate.runner import SuiteResult, Validator, days_back


def report_lines(results: list[SuiteResult]) -> list[str]:
    lines = ["| source | day | result | check | column | observed | unexpected % |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        for c in r.checks:
            pct = "" if c.unexpected_percent is None else f"{c.unexpected_percent:.2f}"
            lines.append(f"| {r.source_id} | {r.day} | {'pass' if c.success else '**FAIL**'} | "
                         f"{c.check} | {c.column or ''} | {c.observed if c.observed is not None else ''}"
                         f" | {pct} |")
    docs = {r.data_docs for r in results if r.data_docs}
    lines += ["", *(f"Data Docs: {d}" for d in sorted(docs))]
    return lines


@flow(name="validation", log_prints=True)
async def validation(sources_file: str | None = None, day: date | None = None,
                     days: int = 1, source: str | None = None) -> dict[str, bool]:
    """Check ``days`` days ending ``day`` (default today, UTC) for every source (or one)."""
    async with runtime(sources=sources_file) as (rt, comps):
        sources = load_sources(rt.settings.sources)
        chosen = [sources.get(source)] if source else sources.sources
        v = Validator(settings=rt.settings, database_url=rt.database_url, pool=comps.pool)
        results: list[SuiteResult] = []
        for src in chosen:  # a task run per source-day, with its result
            for d in days_back(days, day):
                results += await step(f"validate {src.id} {d}",
                                      functools.partial(v.validate, [src], [d]))
    passed = sum(r.success for r in results)
    await publish("stratacrawl-validation",
                  f"Validation: {passed}/{len(results)} source-days pass", report_lines(results))
    failures = [f for r in results for f in r.failures]
    if failures:
        raise ValidationFailed(failures)
    return {f"{r.source_id}/{r.day}": r.success for r in results}
