"""Minute-level integrity: the pages a source had cleaned last, checked against the
source's own suite while a cleaning run goes on.

The daily checkpoint validates a whole source-day once an hour. A redesign that still
answers 200 — its pages no longer carry a required field, or carry it malformed — must
not wait for it. Every cleaner notes the pages it lands in a per-source list in hot
(``hot/cleaned.py``: the items it wrote, the pages that were format errors, when); every
``CHECK_S`` this check takes a window of them — the pages of the last minute, at least
the last few (``window_of``: a source that brings one page a minute is judged on its
last three) — reads them back from PostgreSQL as the source's query asset has them (the
same field columns) with the fields a format error's rules did find, and validates them
with the **row-level expectations of the source's committed suite** — its completeness
and validity families — through Great Expectations on a pandas batch. One definition,
two cadences: no rule set of its own.

What the day tolerates (a field missing on 2 % of records) is not what a minute calls a
collapse: a window of at least ``MIN_PAGES`` pages where an expectation fails on
``COLLAPSE_SHARE`` (half) of them or more raises a P1 ``integrity`` alert naming the
source, the fields and sample pages (URL and trace id); a later window without a
collapse resolves it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.alerts import raise_alert, resolve_alerts
from stratacrawl.cold.records import window_rows
from stratacrawl.hot import cleaned
from stratacrawl.hot.client import HotRedis
from stratacrawl.settings import Settings
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.validate.checks import FUTURE_SKEW_S
from stratacrawl.validate.suites import default_expectations, suite_name

log = logging.getLogger(__name__)
INTEGRITY = "integrity"            # the alert's kind
ROW_CHECKS = ("completeness", "validity")
CHECK_S = 30.0                     # how often the windows are looked at
COLLAPSE_SHARE = 0.5               # an expectation failing on this share of a window
MIN_PAGES = 3                      # the smallest window that can collapse
WINDOW_S = 60.0                    # a window: the pages cleaned this long ago at most …
MAX_WINDOW = 200                   # … at most this many, and at least MIN_PAGES
SAMPLES = 3
Notify = Callable[[str, dict[str, Any]], None]   # (event, payload), as the flows emit


def window_of(source: Source, entries: list[tuple[str, float]], now: float) -> list[str]:
    """A source's window among its entries cleaned last (newest first): its
    ``alerts.integrity_pages`` newest, else those of the last ``WINDOW_S`` — at least the
    ``MIN_PAGES`` newest (a source whose pages are few is judged on its last ones), at
    most ``MAX_WINDOW``."""
    if source.alerts.integrity_pages is not None:
        return [e for e, _ in entries[:source.alerts.integrity_pages]]
    recent = [e for e, at in entries if at >= now - WINDOW_S]
    return (recent if len(recent) >= MIN_PAGES
            else [e for e, _ in entries[:MIN_PAGES]])[:MAX_WINDOW]


@dataclass
class Failing:
    check: str                 # completeness, validity
    column: str
    share: float               # of the window's pages


@dataclass
class WindowResult:
    source_id: str
    pages: int
    failing: list[Failing] = field(default_factory=list)
    samples: list[tuple[str, str | None]] = field(default_factory=list)   # (URL, trace id)

    @property
    def collapsed(self) -> bool:
        return self.pages >= MIN_PAGES and bool(self.failing)

    def message(self) -> str:
        fields = ", ".join(f"{f.column} {f.share:.0%} ({f.check})" for f in self.failing)
        pages = "; ".join(f"{u} (trace {t})" if t else u for u, t in self.samples)
        return (f"{self.source_id}: of the last {self.pages} pages cleaned, failing: {fields}"
                f" — the site may have changed its layout; e.g. {pages}")


class IntegrityCheck:
    """The minute-level check of the sources of one sources file."""

    def __init__(self, *, pool: AsyncConnectionPool, redis: HotRedis, settings: Settings,
                 sources: SourcesFile) -> None:
        self.pool = pool
        self.redis = redis
        self.settings = settings
        self.sources = sources
        self._seen: dict[str, str] = {}           # per source: the newest entry checked
        self._suites: dict[str, Any] = {}         # per source: its row-level GX suite
        self._gx: Any = None                      # (pandas batch definition) once needed

    async def check(self, source_ids: list[str] | None = None) -> list[WindowResult]:
        """One look at every source whose window has pages not checked yet."""
        out = []
        for sid in source_ids or self.sources.ids:
            source = self.sources.get(sid)
            entries = await cleaned.window(self.redis, sid)
            if not entries or self._seen.get(sid) == entries[0][0]:
                continue
            self._seen[sid] = entries[0][0]
            out.append(await self._check_window(
                source, window_of(source, entries, time.time())))
        return out

    async def _check_window(self, source: Source, entries: list[str]) -> WindowResult:
        hashes = [e[2:] for e in entries if e.startswith("r:")]
        errors = []
        for e in entries:
            if e.startswith("e:"):
                at, _, row_id = e[2:].rpartition("|")
                errors.append((datetime.fromisoformat(at), int(row_id)))
        columns, rows = await window_rows(self.pool, source.id, source.field_types,
                                          hashes, errors)
        result = WindowResult(source.id, len(rows))
        if len(rows) < MIN_PAGES:
            return result
        await asyncio.to_thread(self._validate, source, columns, rows, result)
        return result

    def _validate(self, source: Source, columns: list[str], rows: list[tuple[Any, ...]],
                  result: WindowResult) -> None:
        import pandas as pd

        frame = pd.DataFrame.from_records(rows, columns=columns)
        batch = self._batch_definition().get_batch(batch_parameters={"dataframe": frame})
        not_after = (datetime.now(UTC) + timedelta(seconds=FUTURE_SKEW_S)).isoformat()
        with warnings.catch_warnings():   # pandas on GX's regexes with groups: noise
            warnings.filterwarnings("ignore", "This pattern is interpreted as a regular "
                                    "expression", UserWarning)
            validation = batch.validate(
                self._suite(source), expectation_parameters={"not_after": not_after},
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLES})
        sample_rows: list[int] = []
        for r in validation.results:
            share = (r.result or {}).get("unexpected_percent")
            if r.success or share is None:
                continue
            # (GX counts a validity share among the present values; of the window here)
            count = (r.result or {}).get("unexpected_count") or 0
            share = count / len(rows) if r.expectation_config.meta.get(
                "check") == "validity" else share / 100
            if share < COLLAPSE_SHARE:
                continue
            result.failing.append(Failing(r.expectation_config.meta.get("check", "?"),
                                          r.expectation_config.kwargs.get("column", "?"), share))
            sample_rows += (r.result or {}).get("partial_unexpected_index_list") or []
        for i in list(dict.fromkeys(sample_rows))[:SAMPLES]:
            result.samples.append((str(frame.at[i, "page_url"]),
                                   None if pd.isna(frame.at[i, "trace_id"])
                                   else str(frame.at[i, "trace_id"])))

    def _batch_definition(self) -> Any:
        if self._gx is None:
            import great_expectations as gx
            from great_expectations.data_context.types.base import ProgressBarsConfig

            context = gx.get_context(mode="ephemeral")
            context.variables.progress_bars = ProgressBarsConfig(globally=False,
                                                                 metric_calculations=False)
            asset = context.data_sources.add_pandas("integrity").add_dataframe_asset("window")
            self._gx = asset.add_batch_definition_whole_dataframe("window")
        return self._gx

    def _suite(self, source: Source) -> Any:
        """The row-level expectations of the source's committed suite (the default suite
        while the project has none for it)."""
        suite = self._suites.get(source.id)
        if suite is not None:
            return suite
        import great_expectations as gx
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        from stratacrawl.validate.project import committed_suite

        committed = committed_suite(self.settings, source.id)
        configs = ([c.to_json_dict() for c in committed.expectation_configurations]
                   if committed is not None else default_expectations(source))
        suite = gx.ExpectationSuite(name=f"{suite_name(source.id)}.window")
        for c in configs:
            if (c.get("meta") or {}).get("check") in ROW_CHECKS:
                suite.add_expectation_configuration(ExpectationConfiguration(
                    type=c["type"], kwargs=c["kwargs"], meta=c.get("meta")))
        self._suites[source.id] = suite
        return suite

    async def settle(self, results: list[WindowResult], notify: Notify | None) -> None:
        """Raise the alert of each collapsed window (once while it stays open), resolve
        that of each window that no longer is; ``notify`` hears each change."""
        for r in results:
            if r.collapsed:
                alert_id = await raise_alert(
                    self.pool, kind=INTEGRITY, source_id=r.source_id, severity="critical",
                    level="P1", message=r.message(), quiet_for=timedelta(days=3650),
                    details={"pages": r.pages, "samples": r.samples, "failing": [
                        {"check": f.check, "column": f.column, "share": round(f.share, 3)}
                        for f in r.failing]})
                if alert_id is not None:
                    log.warning("alert P1 integrity: %s", r.message(),
                                extra={"source_id": r.source_id, "alert_id": alert_id})
                    if notify:
                        notify("stratacrawl.alert.fired", {
                            "rule": INTEGRITY, "level": "P1", "source": r.source_id,
                            "message": r.message(), "alert_id": alert_id})
            elif r.pages >= MIN_PAGES and await resolve_alerts(
                    self.pool, kind=INTEGRITY, source_id=r.source_id):
                log.info("alert resolved: integrity %s", r.source_id)
                if notify:
                    notify("stratacrawl.alert.resolved", {"rule": INTEGRITY,
                                                          "source": r.source_id})

    async def watch(self, done: asyncio.Event, notify: Notify | None = None,
                    source_ids: list[str] | None = None) -> None:
        """Check every ``CHECK_S`` until ``done`` is set, then once more (what the run
        cleaned last). A failing look is logged; the next one tries again."""
        while True:
            try:
                await asyncio.wait_for(done.wait(), CHECK_S)
            except TimeoutError:
                pass
            try:
                await self.settle(await self.check(source_ids), notify)
            except Exception as e:   # the check must never stop the cleaning
                log.warning("integrity check failed: %s", e)
            if done.is_set():
                return
