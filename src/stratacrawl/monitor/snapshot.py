"""Anomaly snapshots: when an alert fires, what the source looked like —
active tasks, connection pool states, queue lengths, the last 100 errors — is kept in
PostgreSQL and linked from the alert, so the on-call engineer starts from facts."""

from __future__ import annotations

import json
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold import monitoring as q
from stratacrawl.hot import live
from stratacrawl.hot.client import HotRedis, connections_in_use
from stratacrawl.hot.queue import leased_count, ready_count


async def capture(redis: HotRedis, pool: AsyncConnectionPool, source_id: str | None,
                  alert_id: int | None) -> int:
    """Take a snapshot, link it from ``alert_id``; returns its id."""
    queues: dict[str, Any] = {}
    active: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    async with pool.connection() as conn:
        if source_id is not None:
            active = await q.active_tasks(conn, source_id)
            queues["ledger"] = await q.task_states(conn, source_id)
            errors = await q.last_errors(conn, source_id)
    if source_id is not None:
        queues["hot_ready"] = await ready_count(redis, source_id)
        queues["hot_leased"] = await leased_count(redis, source_id)
        trace = await live.trace(redis, source_id)
        errors = [{**t, "from": "trace"} for t in trace if t.get("error")] + errors
    pool_states = {"postgres": pool.get_stats(),
                   "redis": {"in_use": connections_in_use(redis)}}
    async with pool.connection() as conn, conn.transaction():
        snapshot_id = await q.store_snapshot(
            conn, alert_id, source_id, json.dumps(active, default=str),
            json.dumps(pool_states, default=str), json.dumps(queues, default=str),
            json.dumps(errors[:100], default=str))
    return snapshot_id
