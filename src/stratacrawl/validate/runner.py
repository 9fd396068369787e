"""Run a source-day's checkpoint of the committed GX project (``validate.project``):
``checkpoint.run(batch_parameters={"day": ...}, expectation_parameters=...)``, exactly what
a data engineer runs with GX's own API. GX stores the result in its results store and
updates Data Docs; every result is also kept in PostgreSQL (``validation_results``), and a
failure raises an alert.

Great Expectations is synchronous and slow to import (2 to 5 s), so it is imported here only
and runs in a worker thread; a file lock serialises runs that share one results folder.
"""

from __future__ import annotations

import asyncio
import fcntl
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.alerts import raise_alert, resolve_alerts
from stratacrawl.cold.validation_results import store_results
from stratacrawl.docs_links import served_at
from stratacrawl.settings import Settings
from stratacrawl.sources import Source
from stratacrawl.validate.checks import ExpectedCount, parameters
from stratacrawl.validate.project import BATCH, SITE, open_project, write_source
from stratacrawl.validate.suites import suite_name

VALIDATION_FAILED = "validation_failed"


@dataclass
class CheckOutcome:
    check: str               # count, freshness, completeness, validity, uniqueness, or custom
    expectation: str
    column: str | None
    success: bool
    observed: Any
    expected: dict[str, Any]  # the bounds, regex or share it was held to (parameters resolved)
    unexpected_percent: float | None
    status: str = ""          # pass, FAIL, learning (a count with no basis yet), or error

    def __post_init__(self) -> None:
        self.status = self.status or ("pass" if self.success else "FAIL")

    def describe(self) -> str:
        what = f"{self.check} {self.column}" if self.column else self.check
        seen = (f"{self.unexpected_percent:.1f}% unexpected" if self.unexpected_percent is not None
                else f"observed {self.observed}")
        return f"{what}: {self.status} ({seen})"


@dataclass
class SuiteResult:
    source_id: str
    day: date
    suite: str
    success: bool
    checks: list[CheckOutcome]
    parameters: dict[str, Any]
    count_basis: str
    suite_committed: bool     # False: the project had no objects for the source; written now
    data_docs: str | None = None
    seconds: float = 0.0
    statistics: dict[str, Any] = field(default_factory=dict)
    alert_id: int | None = None   # the validation_failed alert this result raised (not folded)

    @property
    def failures(self) -> list[str]:
        return [f"{self.source_id} {self.day}: {c.describe()}" for c in self.checks if not c.success]


@dataclass
class _Job:
    source: Source
    day: date
    params: dict[str, Any]
    expected: ExpectedCount


class Validator:
    """Validates source-days; see the module docstring."""

    def __init__(self, *, settings: Settings, database_url: str, pool: AsyncConnectionPool) -> None:
        self.settings = settings
        self.database_url = database_url
        self.pool = pool

    async def validate(self, sources: list[Source], days: list[date]) -> list[SuiteResult]:
        """Day by day, oldest first: a day's stored result is history for the next one's
        expected count."""
        results: list[SuiteResult] = []
        for day in sorted(days):
            jobs = []
            for source in sources:
                params, expected = await parameters(self.pool, source, day)
                jobs.append(_Job(source, day, params, expected))
            done = await asyncio.to_thread(self._run_gx, jobs)
            await self._store(done)
            results += done
        return results

    # -- Great Expectations (worker thread) -------------------------------------------------
    def _run_gx(self, jobs: list[_Job]) -> list[SuiteResult]:
        state = self.settings.gx_results_path
        state.mkdir(parents=True, exist_ok=True)
        with open(state / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            context = open_project(self.settings, self.database_url)
            written = {s.id: write_source(context, s)
                       for s in {j.source.id: j.source for j in jobs}.values()}
            return [self._run_one(context, job, committed=not written[job.source.id])
                    for job in jobs]

    def _run_one(self, context: Any, job: _Job, *, committed: bool) -> SuiteResult:
        t0 = time.monotonic()
        name = suite_name(job.source.id)
        run = context.checkpoints.get(name).run(
            batch_parameters={BATCH: job.day.isoformat()}, expectation_parameters=job.params)
        (key, validation), = run.run_results.items()
        checks = [_outcome(r, learning=job.expected.learning) for r in validation.results]
        urls = context.get_docs_sites_urls(resource_identifier=key, site_name=SITE)
        return SuiteResult(
            source_id=job.source.id, day=job.day, suite=name,
            success=all(c.success for c in checks), checks=checks, parameters=job.params,
            count_basis=job.expected.basis, suite_committed=committed,
            data_docs=served_at(urls[0]["site_url"] if urls else None,
                                self.settings.data_docs_path, self.settings.data_docs_url),
            seconds=time.monotonic() - t0, statistics=dict(validation.statistics))

    # -- history and alerts -----------------------------------------------------------------
    async def _store(self, results: list[SuiteResult]) -> None:
        await store_results(self.pool, uuid.uuid4().hex, (
            {"source_id": r.source_id, "day": r.day, "suite": r.suite, "success": r.success,
             "statistics": {**r.statistics, "parameters": r.parameters,
                            "count_basis": r.count_basis},
             "results": [c.__dict__ for c in r.checks], "data_docs": r.data_docs}
            for r in results))
        for r in results:
            if r.success:
                await resolve_alerts(self.pool, kind=VALIDATION_FAILED, source_id=r.source_id)
            else:
                r.alert_id = await raise_alert(
                    self.pool, kind=VALIDATION_FAILED, source_id=r.source_id,
                    severity="critical", level="P1", message="; ".join(r.failures),
                    details={"day": r.day, "data_docs": r.data_docs})


def _outcome(result: Any, *, learning: bool) -> CheckOutcome:
    config = result.expectation_config
    kwargs = dict(config.kwargs)
    res = result.result or {}
    check = (config.meta or {}).get("check", "custom")
    outcome = CheckOutcome(
        check=check, expectation=config.type, column=kwargs.get("column"),
        success=bool(result.success), observed=_plain(res.get("observed_value")),
        expected={k: _plain(v) for k, v in kwargs.items() if k not in ("batch_id", "column")},
        unexpected_percent=res.get("unexpected_percent"))
    error = _exception(result.exception_info)
    if error:   # e.g. a hand-edited suite naming a column the source does not have
        outcome.status, outcome.observed = "error", error
    elif check == "count" and learning:   # no expectation to hold the count to yet
        outcome.status = "learning"
    return outcome


def _plain(value: Any) -> Any:
    """Times as ISO 8601 in UTC (GX returns them in the local zone), the rest as is."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def _exception(info: Any) -> str | None:
    """GX's exception info: one dict, or one per metric."""
    if not isinstance(info, dict):
        return None
    if "raised_exception" in info:
        return str(info.get("exception_message")) if info.get("raised_exception") else None
    return next(filter(None, (_exception(v) for v in info.values())), None)


def days_back(n: int, today: date | None = None) -> list[date]:
    """The last ``n`` days, oldest first, ending today (UTC)."""
    from datetime import timedelta

    today = today or datetime.now(UTC).date()
    return [today - timedelta(days=i) for i in range(n - 1, -1, -1)]
