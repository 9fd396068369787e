"""Nightly sinking: what nobody touched leaves the faster tiers.

Steps, each idempotent:
1. backfill demotion (URL state that missed warm while Elasticsearch was away);
2. write hot access statistics (hits, last access) back to cold;
3. warm → cold: documents not accessed for ``retention`` leave warm (cold keeps the
   durable copy, lookups answer the same); documents accessed meanwhile get their
   ``last_access`` refreshed instead; weekly indices left empty are dropped;
4. next weeks' indices are created ahead;
5. staging partitions older than the staging retention are dropped, after the pages of
   sources with ``snapshots: true`` are copied to ``page_snapshots``;
6. item tasks finished before the staging retention leave the ledger with their keys:
   their pages are gone from staging, and the URL's state (what dedup and re-crawl read)
   stays in ``url_state``. A task row and its key cost about as much as the URL's state;
   kept for ever they would double a crawled URL's cost in cold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.staging import drop_partition, staging_partitions
from stratacrawl.cold.url_state import last_used, write_access
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.url_state import access_of, fingerprint_batches
from stratacrawl.step_runner import StepRunner, run_directly
from stratacrawl.tiers.demotion import DemoteStats, demote
from stratacrawl.warm.store import WarmStore

log = logging.getLogger(__name__)
PAGE = 5000


@dataclass
class SinkReport:
    demoted: DemoteStats = field(default_factory=DemoteStats)
    access_written_back: int = 0
    warm_deleted: int = 0
    warm_refreshed: int = 0
    indices_dropped: list[str] = field(default_factory=list)
    indices_created: list[str] = field(default_factory=list)
    staging_dropped: list[str] = field(default_factory=list)
    snapshot_rows: int = 0
    tasks_retired: int = 0
    steps: dict[str, float] = field(default_factory=dict)   # step → seconds


async def write_back_access(redis: HotRedis, pool: AsyncConnectionPool,
                            batch: int = 5000) -> int:
    """Hot hits and last access → cold ``url_state`` (so sinking judges by real use)."""
    total = 0
    async for fps in fingerprint_batches(redis, batch):
        accessed = [(fp, h, la) for fp, (h, la) in zip(fps, await access_of(redis, fps),
                                                       strict=True) if la is not None]
        if accessed:
            total += await write_access(pool, [a[0] for a in accessed],
                                        [a[1] for a in accessed], [a[2] for a in accessed])
    return total


async def sink_warm(warm: WarmStore, pool: AsyncConnectionPool,
                    cutoff: datetime) -> tuple[int, int]:
    """Documents whose ``last_access`` is before ``cutoff`` leave warm unless cold shows a
    later access (then their ``last_access`` is refreshed). Returns (deleted, refreshed).

    Pages of ``url_dedup`` ids find the URLs; each URL's ``url_meta`` twin (same id, same
    week) goes with it. A second pass over ``url_meta`` catches any orphan."""
    deleted = refreshed = 0
    dedup, meta = warm.layout.alias("url_dedup"), warm.layout.alias("url_meta")
    for family, alias, twins in (("url_dedup", dedup, (dedup, meta)), ("url_meta", meta, (meta,))):
        await warm.refresh(family)
        skipped: set[str] = set()
        while True:
            hits = await warm.accessed_before(family, cutoff, skipped, PAGE)
            if not hits:
                break
            cold = await last_used(pool, list({h["_id"] for h in hits}))
            actions: list[dict[str, Any]] = []
            for h in hits:
                seen = cold.get(h["_id"])
                if seen is None:  # never sink what cold does not hold
                    skipped.add(h["_id"])
                    continue
                week = h["_index"][len(alias):]
                for twin in twins:
                    if seen >= cutoff:
                        actions.append({"_op_type": "update", "_index": twin + week,
                                        "_id": h["_id"], "doc": {"last_access": seen.isoformat()}})
                    else:
                        actions.append({"_op_type": "delete", "_index": twin + week,
                                        "_id": h["_id"]})
                if seen >= cutoff:
                    refreshed += len(twins)
                else:
                    deleted += len(twins)
            if not actions:
                continue
            actions.sort(key=lambda a: a["_index"])  # runs of one index
            await warm.index(actions, chunk=2 * PAGE)
            await warm.refresh(family)
    return deleted, refreshed


async def expire_staging(pool: AsyncConnectionPool, *, keep_days: int, snapshot_sources: list[str],
                         today: date) -> tuple[list[str], int]:
    """Drop staging day partitions older than ``keep_days``; snapshot sources' pages first."""
    limit = (today - timedelta(days=keep_days)).strftime("%Y%m%d")
    dropped, copied = [], 0
    for name in await staging_partitions(pool):
        day = name.rsplit("_", 1)[-1]
        if not (day.isdigit() and day < limit):
            continue
        copied += await drop_partition(pool, name, snapshot_sources)
        dropped.append(name)
    return dropped, copied


async def sink(*, redis: HotRedis, warm: WarmStore, pool: AsyncConnectionPool, ledger: Ledger,
               warm_retention: timedelta, staging_days: int,
               snapshot_sources: list[str], now: datetime | None = None,
               run: StepRunner = run_directly) -> SinkReport:
    """The nightly run, each step through ``run`` (a task run of its own in a flow); see
    the module docstring."""
    now = now or datetime.now(UTC)
    report = SinkReport()

    async def step(name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        t0 = time.monotonic()
        try:
            return await run(name, fn)
        finally:
            report.steps[name] = round(time.monotonic() - t0, 3)

    report.demoted = await step("backfill demotion", lambda: demote(pool, warm))
    # (ASCII names: the Prefect UI drops an arrow from a task run name)
    report.access_written_back = await step("hot access to cold",
                                            lambda: write_back_access(redis, pool))
    if report.demoted.error is None:  # warm reachable
        report.warm_deleted, report.warm_refreshed = await step(
            "warm to cold", lambda: sink_warm(warm, pool, now - warm_retention))
        report.indices_dropped = await step("drop empty weeks",
                                            lambda: warm.drop_empty_weeks(now))
        report.indices_created = await step("create weeks ahead",
                                            lambda: warm.create_weeks_ahead(2, now))
    report.staging_dropped, report.snapshot_rows = await step(
        "staging retention", lambda: expire_staging(
            pool, keep_days=staging_days, snapshot_sources=snapshot_sources, today=now.date()))
    report.tasks_retired = await step("ledger retention", lambda: ledger.retire(
        now - timedelta(days=staging_days)))
    return report
