"""validation: the GX project's checkpoint per source and day; Data Docs, history in
PostgreSQL, an alert and a failed run when a check fails."""

from __future__ import annotations

import functools
from datetime import date

from prefect import flow

from flows.common import emit, flow_sources, load_settings, publish_link, publish_table, step
from stratacrawl.errors import ValidationFailed
from stratacrawl.validate.runner import SuiteResult, days_back
from stratacrawl.wiring import open_app


def check_rows(results: list[SuiteResult]) -> list[dict[str, object]]:
    """One row per check of each source-day (the validation table artifact)."""
    return [{"source": r.source_id, "day": str(r.day), "result": c.status,
             "check": c.check, "column": c.column or "",
             "observed": "" if c.observed is None else str(c.observed),
             "unexpected_percent": None if c.unexpected_percent is None
             else round(c.unexpected_percent, 2)}
            for r in results for c in r.checks]


def _failures(results: list[SuiteResult]) -> str | None:
    """A source-day's task run fails with its failed checks."""
    return "; ".join(f for r in results for f in r.failures) or None


def _key(*parts: object) -> str:
    """An artifact key: lowercase letters, digits and dashes only."""
    return "-".join("".join(ch if ch.isalnum() else "-" for ch in str(p).lower()) for p in parts)


@flow(name="validation", log_prints=True)
async def validation(sources_file: str | None = None, day: date | None = None,
                     days: int = 1, source: str | None = None) -> dict[str, bool]:
    """Check ``days`` days ending ``day`` (default today, UTC) for every source (or one)."""
    async with open_app(await load_settings(sources=sources_file)) as comps:
        sources = flow_sources(comps.settings, source=source)
        chosen = [sources.get(source)] if source else sources.sources
        v = comps.validator()
        results: list[SuiteResult] = []
        for src in chosen:  # a task run per source-day, with its result
            for d in days_back(days, day):
                results += await step(f"validate {src.id} {d}",
                                      functools.partial(v.validate, [src], [d]),
                                      fails=_failures)
    passed = sum(r.success for r in results)
    await publish_table("stratacrawl-validation",
                        f"Validation: {passed}/{len(results)} source-days pass", check_rows(results))
    for r in results:  # each result's own page in Data Docs, one link artifact per source
        if r.data_docs:
            await publish_link(_key("stratacrawl-data-docs", r.source_id),
                               f"Data Docs: {r.source_id} {r.day} "
                               f"({'pass' if r.success else 'FAIL'})", r.data_docs)
    for r in results:   # a new failure notifies as a P1 alert, its Data Docs page linked
        if r.alert_id is not None:
            emit("stratacrawl.alert.fired", {
                "rule": "validation_failed", "level": "P1", "source": r.source_id,
                "alert_id": r.alert_id, "data_docs": r.data_docs,
                "message": "; ".join(r.failures) + (f" — Data Docs: {r.data_docs}"
                                                    if r.data_docs else "")})
    failures = [f for r in results for f in r.failures]
    if failures:
        raise ValidationFailed(failures)
    return {f"{r.source_id}/{r.day}": r.success for r in results}
