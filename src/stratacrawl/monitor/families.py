"""The seven metric families, per source, from hot (live counters) and
cold (ledger, staging, records):

1. scheduling lag — due but unclaimed tasks and the age of the oldest;
2. fetch success rate (5 minutes);
3. response time — mean and p99 (5 minutes) against the hour before;
4. queue backlog — hot ready window and ledger;
5. ingest vs fetch — pages fetched, rows staged, records committed per minute;
6. retry ratio — level-1 retries per request (5 minutes);
7. task completion latency — task created → record committed (p50, p99, last hour).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stratacrawl.components import Components
from stratacrawl.frontier.hot_queue import ready_key
from stratacrawl.monitor.live import LiveMetrics, Window

WINDOW_MIN = 5
BASELINE_MIN = 60


@dataclass
class SourceMetrics:
    source_id: str
    due_tasks: int = 0
    lag_s: float = 0.0
    window: Window = field(default_factory=Window)
    baseline: Window = field(default_factory=Window)
    hot_backlog: int = 0
    ledger_backlog: int = 0
    staged_per_min: float = 0.0
    records_per_min: float = 0.0
    completion_p50_s: float | None = None
    completion_p99_s: float | None = None
    last_success_at: float | None = None     # epoch of the newest successful fetch

    @property
    def fetched_per_min(self) -> float:
        return self.window.requests / WINDOW_MIN

    @property
    def ok_per_min(self) -> float:
        return self.window.ok / WINDOW_MIN


async def collect(comps: Components, source_ids: list[str],
                  now: float | None = None) -> dict[str, SourceMetrics]:
    """A snapshot of every family for these sources (a handful of grouped queries); the
    live windows end at ``now`` (default: the current time)."""
    out = {sid: SourceMetrics(sid) for sid in source_ids}
    live = LiveMetrics(redis=comps.redis)
    for sid, m in out.items():
        m.window = await live.window(sid, WINDOW_MIN, now=now)
        m.baseline = await live.window(sid, BASELINE_MIN, end_offset=WINDOW_MIN, now=now)
        m.hot_backlog = int(await comps.redis.zcard(ready_key(sid)))
    async with comps.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT source_id, count(*), count(*) FILTER (WHERE due_at <= now()), "
            "COALESCE(extract(epoch FROM now() - min(due_at) FILTER (WHERE due_at <= now())), 0) "
            "FROM tasks WHERE state IN ('PENDING', 'RETRY_WAIT') AND source_id = ANY(%s) "
            "GROUP BY 1", (source_ids,))
        for sid, backlog, due, lag in await cur.fetchall():
            m = out[sid]
            m.ledger_backlog, m.due_tasks, m.lag_s = int(backlog), int(due), float(lag)
        cur = await conn.execute(
            "SELECT source_id, extract(epoch FROM max(fetched_at)) FROM staging "
            "WHERE source_id = ANY(%s) AND status BETWEEN 200 AND 399 "
            "AND fetched_at > now() - interval '1 day' GROUP BY 1", (source_ids,))
        for sid, last in await cur.fetchall():
            out[sid].last_success_at = float(last) if last is not None else None
        cur = await conn.execute(
            "SELECT source_id, count(*) FROM staging WHERE source_id = ANY(%s) "
            "AND fetched_at > now() - %s * interval '1 minute' GROUP BY 1",
            (source_ids, WINDOW_MIN))
        for sid, n in await cur.fetchall():
            out[sid].staged_per_min = int(n) / WINDOW_MIN
        cur = await conn.execute(
            "SELECT r.source_id, count(*) FILTER (WHERE r.created_at > now() - %s * interval "
            "'1 minute'), percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM "
            "r.created_at - t.created_at)), percentile_cont(0.99) WITHIN GROUP (ORDER BY "
            "extract(epoch FROM r.created_at - t.created_at)) FROM records r "
            "JOIN tasks t ON t.id = r.task_id WHERE r.source_id = ANY(%s) "
            "AND r.day >= (now() - interval '1 hour')::date "
            "AND r.created_at > now() - interval '1 hour' GROUP BY 1",
            (WINDOW_MIN, source_ids))
        for sid, recent, p50, p99 in await cur.fetchall():
            m = out[sid]
            m.records_per_min = int(recent) / WINDOW_MIN
            m.completion_p50_s = float(p50) if p50 is not None else None
            m.completion_p99_s = float(p99) if p99 is not None else None
    return out
