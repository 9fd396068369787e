"""Monitoring history in cold, for the ops page's charts: the live per-minute counters
(hot keeps them two hours) rolled up into ``metrics_minutes``, with the backlog and
ingest measured when the alert rules are evaluated. Every evaluation (the ``monitor``
deployment, ``metrics serve`` / ``ops --evaluate-every``) rolls up the last minutes;
the ops page rolls up what hot still holds when it has not been done for a minute."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.metrics_history import MinuteRow, prune_minutes, record_minutes
from stratacrawl.hot import live
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.live import KEEP_S
from stratacrawl.monitor.families import SourceMetrics

KEEP_DAYS = 7
EVALUATION_MINUTES = 10  # an evaluation re-writes this many minutes (idempotent)


def _at(epoch_minute: int) -> datetime:
    return datetime.fromtimestamp(epoch_minute * 60, UTC)


async def roll_up(pool: AsyncConnectionPool, redis: HotRedis, source_ids: list[str], *,
                  minutes: int = EVALUATION_MINUTES, metrics: dict[str, SourceMetrics] | None = None,
                  now: float | None = None) -> int:
    """Write the last ``minutes`` minutes of every source's live counters (the current
    one as far as it got: the next roll-up completes it), and
    (with ``metrics``) the backlog and ingest measured now, as this minute's; returns the
    rows written."""
    now = now or time.time()
    rows = []
    for sid, per_minute in (await live.minutes(redis, 
            source_ids, min(minutes, KEEP_S // 60), now)).items():
        for m, w in per_minute:
            rows.append(MinuteRow(sid, _at(m), requests=w.requests, ok=w.ok, failed=w.failed,
                                  retries=w.retries, latency_ms_sum=w.latency_ms_sum,
                                  p99_ms=w.quantile_ms(0.99)))
    for sid, sm in (metrics or {}).items():
        rows.append(MinuteRow(sid, _at(int(now // 60)), hot_backlog=sm.hot_backlog,
                              ledger_backlog=sm.ledger_backlog, staged_per_min=sm.staged_per_min))
    await record_minutes(pool, rows)
    return len(rows)


async def prune(pool: AsyncConnectionPool, now: float | None = None) -> int:
    """Drop the minutes older than ``KEEP_DAYS`` (the evaluation does, once a minute; a
    page view only writes). Returns the rows dropped."""
    cutoff = datetime.fromtimestamp(now or time.time(), UTC) - timedelta(days=KEEP_DAYS)
    return await prune_minutes(pool, cutoff)
