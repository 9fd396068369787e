"""The seven metric families, per source, from hot (live counters) and
cold (ledger, staging, records):

1. scheduling lag — due but unclaimed tasks and the age of the oldest;
2. fetch success rate (5 minutes);
3. response time — mean and p99 (5 minutes) against the hour before;
4. queue backlog — hot ready window and ledger;
5. ingest vs fetch — pages fetched and rows staged per minute over the same settled
   minutes (below), records committed per minute (5 minutes);
6. retry ratio — level-1 retries per request (5 minutes);
7. task completion latency — task created → record committed (p50, p99, last hour).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold import monitoring as q
from stratacrawl.hot import live
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.live import Window
from stratacrawl.hot.queue import ready_count

WINDOW_MIN = 5
BASELINE_MIN = 60
# Fetched and staged pages are compared over the same whole minutes, the last of which
# ended at least SETTLE_S ago: a page reaches staging seconds after its fetch (the staging
# writer's flush interval, more behind a backlog), so minutes still filling compare a
# crawl's latest fetches with rows on their way — the first minute of every crawl looked
# like staging falling behind.
SETTLE_S = 30


def settled_minutes(now: float) -> tuple[int, int]:
    """The first and last epoch minute of the ``WINDOW_MIN`` whole minutes that ended at
    least ``SETTLE_S`` before ``now``."""
    last = int((now - SETTLE_S) // 60) - 1
    return last - WINDOW_MIN + 1, last


@dataclass
class SourceMetrics:
    source_id: str
    due_tasks: int = 0
    lag_s: float = 0.0
    window: Window = field(default_factory=Window)
    baseline: Window = field(default_factory=Window)
    settled: Window = field(default_factory=Window)   # over ``settled_minutes``
    hot_backlog: int = 0
    ledger_backlog: int = 0
    staged_per_min: float = 0.0                       # over ``settled_minutes``
    records_per_min: float = 0.0
    completion_p50_s: float | None = None
    completion_p99_s: float | None = None
    last_success_at: float | None = None     # epoch of the newest successful fetch
    last_request_at: float | None = None     # epoch of the newest request, any outcome

    @property
    def fetched_per_min(self) -> float:
        return self.settled.requests / WINDOW_MIN

    @property
    def ok_per_min(self) -> float:
        return self.settled.ok / WINDOW_MIN


async def collect(redis: HotRedis, pool: AsyncConnectionPool, source_ids: list[str],
                  now: float | None = None) -> dict[str, SourceMetrics]:
    """A snapshot of every family for these sources (a handful of grouped queries); the
    live windows end at ``now`` (default: the current time)."""
    now = time.time() if now is None else now
    first_min, last_min = settled_minutes(now)
    out = {sid: SourceMetrics(sid) for sid in source_ids}
    for sid, m in out.items():
        m.window = await live.window(redis, sid, WINDOW_MIN, now=now)
        m.baseline = await live.window(redis, sid, BASELINE_MIN, end_offset=WINDOW_MIN,
                                       now=now)
        m.settled = await live.window(redis, sid, WINDOW_MIN, now=last_min * 60)
        m.hot_backlog = await ready_count(redis, sid)
        m.last_request_at = await live.last_request_at(redis, sid)
    async with pool.connection() as conn:
        for sid, backlog, due, lag in await q.ledger_backlog(conn, source_ids):
            m = out[sid]
            m.ledger_backlog, m.due_tasks, m.lag_s = backlog, due, lag
        for sid, last in await q.last_success(conn, source_ids):
            out[sid].last_success_at = last
        for sid, n in await q.staged_between(conn, source_ids, first_min * 60,
                                             (last_min + 1) * 60):
            out[sid].staged_per_min = n / WINDOW_MIN
        for sid, recent, p50, p99 in await q.record_completion(conn, source_ids, WINDOW_MIN):
            m = out[sid]
            m.records_per_min = recent / WINDOW_MIN
            m.completion_p50_s, m.completion_p99_s = p50, p99
    return out
