"""Anomaly snapshots: when an alert fires, what the source looked like —
active tasks, connection pool states, queue lengths, the last 100 errors — is kept in
PostgreSQL and linked from the alert, so the on-call engineer starts from facts."""

from __future__ import annotations

import json
from typing import Any

from stratacrawl.components import Components
from stratacrawl.frontier.hot_queue import leased_key, ready_key
from stratacrawl.hot.client import connections_in_use
from stratacrawl.monitor.live import LiveMetrics


async def capture(comps: Components, source_id: str | None, alert_id: int | None) -> int:
    """Take a snapshot, link it from ``alert_id``; returns its id."""
    queues: dict[str, Any] = {}
    active: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    async with comps.pool.connection() as conn:
        if source_id is not None:
            cur = await conn.execute(
                "SELECT id, url, state, lease_owner, lease_expires_at, attempts, batch_id FROM tasks "
                "WHERE source_id = %s AND state IN ('LEASED', 'FETCHING') ORDER BY id LIMIT 100",
                (source_id,))
            active = [dict(zip(("id", "url", "state", "owner", "lease_expires_at", "attempts",
                                "batch_id"), row, strict=True)) for row in await cur.fetchall()]
            cur = await conn.execute(
                "SELECT state, count(*) FROM tasks WHERE source_id = %s GROUP BY 1", (source_id,))
            queues["ledger"] = {s: int(n) for s, n in await cur.fetchall()}
            cur = await conn.execute(
                "SELECT updated_at, url, last_status, last_error FROM tasks WHERE source_id = %s "
                "AND last_error IS NOT NULL ORDER BY updated_at DESC LIMIT 100", (source_id,))
            errors = [{"at": at, "url": u, "status": st, "error": e, "from": "ledger"}
                      for at, u, st, e in await cur.fetchall()]
    if source_id is not None:
        queues["hot_ready"] = int(await comps.redis.zcard(ready_key(source_id)))
        queues["hot_leased"] = int(await comps.redis.zcard(leased_key(source_id)))
        trace = await LiveMetrics(redis=comps.redis).trace(source_id)
        errors = [{**t, "from": "trace"} for t in trace if t.get("error")] + errors
    pool_states = {"postgres": comps.pool.get_stats(),
                   "redis": {"in_use": connections_in_use(comps.redis)}}
    async with comps.pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "INSERT INTO alert_snapshots (alert_id, source_id, active_tasks, pool_states, queues, "
            "last_errors) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (alert_id, source_id, json.dumps(active, default=str),
             json.dumps(pool_states, default=str), json.dumps(queues, default=str),
             json.dumps(errors[:100], default=str)))
        row = await cur.fetchone()
        snapshot_id = int(row[0]) if row else 0
        if alert_id is not None:
            await conn.execute("UPDATE alerts SET snapshot_id = %s WHERE id = %s",
                               (snapshot_id, alert_id))
    return snapshot_id
