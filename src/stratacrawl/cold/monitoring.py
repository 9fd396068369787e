"""What monitoring reads from cold: per source the ledger's backlog and lag, the staging
rate and last success, the records' completion times (``monitor/families.py``), and the
facts an anomaly snapshot keeps (``monitor/snapshot.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stratacrawl.cold.pool import Db, connection


async def ledger_backlog(db: Db, source_ids: Sequence[str]
                         ) -> list[tuple[str, int, int, float]]:
    """(source, ready tasks, due now, seconds the oldest due task waits)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, count(*), count(*) FILTER (WHERE due_at <= now()), "
            "COALESCE(extract(epoch FROM now() - min(due_at) FILTER (WHERE due_at <= now())), 0) "
            "FROM tasks WHERE state IN ('PENDING', 'RETRY_WAIT') AND source_id = ANY(%b) "
            "GROUP BY 1", (list(source_ids),))
        return [(str(s), int(b), int(d), float(lag)) for s, b, d, lag in await cur.fetchall()]


async def last_success(db: Db, source_ids: Sequence[str]
                       ) -> list[tuple[str, float | None]]:
    """(source, epoch seconds of its newest 2xx/3xx page staged within a day)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, extract(epoch FROM max(fetched_at)) FROM staging "
            "WHERE source_id = ANY(%b) AND status BETWEEN 200 AND 399 "
            "AND fetched_at > now() - interval '1 day' GROUP BY 1", (list(source_ids),))
        return [(str(s), float(t) if t is not None else None) for s, t in await cur.fetchall()]


async def staged_between(db: Db, source_ids: Sequence[str],
                         start: float, end: float) -> list[tuple[str, int]]:
    """(source, pages staged that were fetched from ``start`` to before ``end``, epoch
    seconds)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, count(*) FROM staging WHERE source_id = ANY(%b) "
            "AND fetched_at >= to_timestamp(%s) AND fetched_at < to_timestamp(%s) GROUP BY 1",
            (list(source_ids), start, end))
        return [(str(s), int(n)) for s, n in await cur.fetchall()]


async def record_completion(db: Db, source_ids: Sequence[str], minutes: int
                            ) -> list[tuple[str, int, float | None, float | None]]:
    """(source, records made in the last ``minutes``, p50 and p99 seconds from a task's
    creation to its record) over the last hour."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT r.source_id, count(*) FILTER (WHERE r.created_at > now() - %s * interval "
            "'1 minute'), percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM "
            "r.created_at - t.created_at)), percentile_cont(0.99) WITHIN GROUP (ORDER BY "
            "extract(epoch FROM r.created_at - t.created_at)) FROM records r "
            "JOIN tasks t ON t.id = r.task_id WHERE r.source_id = ANY(%b) "
            "AND r.day >= (now() - interval '1 hour')::date "
            "AND r.created_at > now() - interval '1 hour' GROUP BY 1",
            (minutes, list(source_ids)))
        return [(str(s), int(n), float(p50) if p50 is not None else None,
                 float(p99) if p99 is not None else None) for s, n, p50, p99 in await cur.fetchall()]


# -- anomaly snapshots ----------------------------------------------------------------------
async def active_tasks(db: Db, source_id: str) -> list[dict[str, Any]]:
    """The source's leased and fetching tasks (at most 100)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT id, url, state, lease_owner, lease_expires_at, attempts, batch_id FROM tasks "
            "WHERE source_id = %s AND state IN ('LEASED', 'FETCHING') ORDER BY id LIMIT 100",
            (source_id,))
        return [dict(zip(("id", "url", "state", "owner", "lease_expires_at", "attempts",
                          "batch_id"), row, strict=True)) for row in await cur.fetchall()]


async def task_states(db: Db, source_id: str) -> dict[str, int]:
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT state, count(*) FROM tasks WHERE source_id = %s GROUP BY 1", (source_id,))
        return {str(s): int(n) for s, n in await cur.fetchall()}


async def last_errors(db: Db, source_id: str) -> list[dict[str, Any]]:
    """The source's 100 newest task errors, newest first."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT updated_at, url, last_status, last_error FROM tasks WHERE source_id = %s "
            "AND last_error IS NOT NULL ORDER BY updated_at DESC LIMIT 100", (source_id,))
        return [{"at": at, "url": u, "status": st, "error": e, "from": "ledger"}
                for at, u, st, e in await cur.fetchall()]


async def store_snapshot(db: Db, alert_id: int | None, source_id: str | None,
                         active: str, pool_states: str, queues: str, errors: str) -> int:
    """Keep a snapshot (JSON documents) and link it from its alert; returns its id."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "INSERT INTO alert_snapshots (alert_id, source_id, active_tasks, pool_states, queues, "
            "last_errors) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (alert_id, source_id, active, pool_states, queues, errors))
        row = await cur.fetchone()
        snapshot_id = int(row[0]) if row else 0
        if alert_id is not None:
            await conn.execute("UPDATE alerts SET snapshot_id = %s WHERE id = %s",
                               (snapshot_id, alert_id))
        return snapshot_id
