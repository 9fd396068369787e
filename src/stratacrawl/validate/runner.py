"""Run the suites with Great Expectations: one checkpoint per source-day, results kept in
a file project (``Settings.gx_path``), Data Docs rebuilt in ``Settings.data_docs_path``,
every result stored in PostgreSQL (``validation_results``) and failures raised as alerts.

Great Expectations is synchronous and slow to import (2 to 5 s), so it is imported here only
and runs in a worker thread; a file lock serialises runs that share one project.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.alerts import raise_alert, resolve_alerts
from stratacrawl.cold.db import sqlalchemy_url
from stratacrawl.settings import Settings
from stratacrawl.sources import Source
from stratacrawl.validate.checks import check_query, parameters
from stratacrawl.validate.suites import load_suite

SITE = "stratacrawl"
DATASOURCE = "stratacrawl"
CONNECTION_VAR = "STRATACRAWL_GX_DATABASE_URL"   # the project stores ${VAR}, never the URL
VALIDATION_FAILED = "validation_failed"


@dataclass
class CheckOutcome:
    check: str               # count, freshness, completeness, uniqueness, sanity, or custom
    expectation: str
    column: str | None
    success: bool
    observed: Any
    unexpected_percent: float | None
    kwargs: dict[str, Any]

    def describe(self) -> str:
        what = f"{self.check} {self.column}" if self.column else self.check
        seen = (f"{self.unexpected_percent:.1f}% unexpected" if self.unexpected_percent is not None
                else f"observed {self.observed}")
        return f"{what}: {'pass' if self.success else 'FAIL'} ({seen})"


@dataclass
class SuiteResult:
    source_id: str
    day: date
    suite: str
    success: bool
    checks: list[CheckOutcome]
    parameters: dict[str, float]
    suite_committed: bool
    data_docs: str | None = None
    seconds: float = 0.0
    statistics: dict[str, Any] = field(default_factory=dict)

    @property
    def failures(self) -> list[str]:
        return [f"{self.source_id} {self.day}: {c.describe()}" for c in self.checks if not c.success]


@dataclass
class _Job:
    source: Source
    day: date
    suite: dict[str, Any]
    committed: bool
    params: dict[str, float]


class Validator:
    """Validates source-days; see the module docstring."""

    def __init__(self, *, settings: Settings, database_url: str, pool: AsyncConnectionPool) -> None:
        self.settings = settings
        self.database_url = database_url
        self.pool = pool

    async def validate(self, sources: list[Source], days: list[date]) -> list[SuiteResult]:
        jobs = []
        for source in sources:
            suite, generated = load_suite(self.settings.expectations_dir, source)
            for day in days:
                jobs.append(_Job(source, day, suite, not generated,
                                 await parameters(self.pool, source, day)))
        results = await asyncio.to_thread(self._run_gx, jobs)
        await self._store(results)
        return results

    # -- Great Expectations (worker thread) -------------------------------------------------
    def _run_gx(self, jobs: list[_Job]) -> list[SuiteResult]:
        root = self.settings.gx_path
        root.mkdir(parents=True, exist_ok=True)
        with open(root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            context = self._context(root)
            return [self._run_one(context, job) for job in jobs]

    def _context(self, root: Path) -> Any:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        # The URL reaches GX as a runtime config variable: the project keeps ``${VAR}``,
        # and neither the environment of this process nor a file on disk holds the URL.
        context = gx.get_context(mode="file", project_root_dir=str(root), runtime_environment={
            CONNECTION_VAR: sqlalchemy_url(self.database_url)})
        context.variables.progress_bars = ProgressBarsConfig(globally=False,
                                                             metric_calculations=False)
        docs = self.settings.data_docs_path
        site: Any = {"class_name": "SiteBuilder", "show_how_to_buttons": False,
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(docs)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}}
        for name in context.get_site_names():
            if name != SITE:
                context.delete_data_docs_site(name)
        if SITE in context.get_site_names():
            context.update_data_docs_site(SITE, site)
        else:
            context.add_data_docs_site(SITE, site)
        try:
            context.data_sources.get(DATASOURCE)
        except (KeyError, ValueError, LookupError):
            context.data_sources.add_postgres(name=DATASOURCE,
                                              connection_string="${" + CONNECTION_VAR + "}")
        return context

    def _run_one(self, context: Any, job: _Job) -> SuiteResult:
        import great_expectations as gx
        from great_expectations.checkpoint import UpdateDataDocsAction
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        t0 = time.monotonic()
        name = f"{job.suite['name']}.{job.day.isoformat()}"
        datasource = context.data_sources.get(DATASOURCE)
        if any(a.name == name for a in datasource.assets):
            datasource.delete_asset(name)
        asset = datasource.add_query_asset(name=name, query=check_query(job.source, job.day))
        batch = asset.add_batch_definition_whole_table("day")
        suite = context.suites.add_or_update(gx.ExpectationSuite(
            name=job.suite["name"], meta=job.suite.get("meta") or {},
            expectations=[ExpectationConfiguration(type=e["type"], kwargs=e.get("kwargs", {}),
                                                   meta=e.get("meta") or {}).to_domain_obj()
                          for e in job.suite["expectations"]]))
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=batch, suite=suite))
        checkpoint = context.checkpoints.add_or_update(gx.Checkpoint(
            name=name, validation_definitions=[definition], result_format="SUMMARY",
            actions=[UpdateDataDocsAction(name="data-docs", site_names=[SITE])]))
        try:
            run = checkpoint.run(expectation_parameters=job.params)
        finally:
            context.checkpoints.delete(name)
            context.validation_definitions.delete(name)
            datasource.delete_asset(name)
        (key, validation), = run.run_results.items()
        checks = [_outcome(r) for r in validation.results]
        urls = context.get_docs_sites_urls(resource_identifier=key, site_name=SITE)
        return SuiteResult(
            source_id=job.source.id, day=job.day, suite=job.suite["name"],
            success=bool(validation.success), checks=checks, parameters=job.params,
            suite_committed=job.committed, data_docs=urls[0]["site_url"] if urls else None,
            seconds=time.monotonic() - t0, statistics=dict(validation.statistics))

    # -- history and alerts -----------------------------------------------------------------
    async def _store(self, results: list[SuiteResult]) -> None:
        run_id = uuid.uuid4().hex
        async with self.pool.connection() as conn, conn.transaction():
            for r in results:
                await conn.execute(
                    "INSERT INTO validation_results (run_id, source_id, day, suite, success, "
                    "statistics, results, data_docs) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (run_id, r.source_id, r.day, r.suite, r.success,
                     json.dumps({**r.statistics, "parameters": r.parameters}, default=str),
                     json.dumps([c.__dict__ for c in r.checks], default=str), r.data_docs))
        for r in results:
            if r.success:
                await resolve_alerts(self.pool, kind=VALIDATION_FAILED, source_id=r.source_id)
            else:
                await raise_alert(self.pool, kind=VALIDATION_FAILED, source_id=r.source_id,
                                  severity="critical", message="; ".join(r.failures),
                                  details={"day": r.day, "data_docs": r.data_docs})


def _outcome(result: Any) -> CheckOutcome:
    config = result.expectation_config
    kwargs = dict(config.kwargs)
    res = result.result or {}
    return CheckOutcome(
        check=(config.meta or {}).get("check", "custom"), expectation=config.type,
        column=kwargs.get("column"), success=bool(result.success),
        observed=res.get("observed_value"), unexpected_percent=res.get("unexpected_percent"),
        kwargs={k: v for k, v in kwargs.items() if k not in ("batch_id",)})


def days_back(n: int, today: date | None = None) -> list[date]:
    """The last ``n`` days, oldest first, ending today (UTC)."""
    from datetime import UTC, datetime, timedelta

    today = today or datetime.now(UTC).date()
    return [today - timedelta(days=i) for i in range(n - 1, -1, -1)]
