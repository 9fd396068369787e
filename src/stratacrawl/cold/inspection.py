"""What the weekly inspection reads from cold (``monitor/inspection.py`` writes the
report), and the ``inspection_reports`` table it keeps its table sizes in."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from stratacrawl.cold.pool import Db, connection


async def success_by_day(db: Db) -> list[tuple[str, date, int, int]]:
    """(source, day, tasks succeeded, tasks finished) over the last 7 days."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, finished_at::date AS d, count(*) FILTER (WHERE state = 'SUCCEEDED'), "
            "count(*) FROM tasks WHERE finished_at > now() - interval '7 days' "
            "AND state IN ('SUCCEEDED', 'FAILED') GROUP BY 1, 2 ORDER BY 1, 2")
        return [tuple(r) for r in await cur.fetchall()]


async def backlog_by_day(db: Db) -> list[tuple[date, int, int]]:
    """(day, tasks created, tasks finished) over the last 7 days."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT d, sum(created), sum(finished) FROM ("
            " SELECT created_at::date AS d, 1 AS created, 0 AS finished FROM tasks "
            "  WHERE created_at > now() - interval '7 days' UNION ALL "
            " SELECT finished_at::date, 0, 1 FROM tasks WHERE finished_at > now() - interval '7 days'"
            ") x GROUP BY d ORDER BY d")
        return [(d, int(c), int(f)) for d, c, f in await cur.fetchall()]


async def table_bytes(db: Db, table: str) -> int:
    """On-disk size of a table with its indexes and partitions (two levels deep)."""
    async with connection(db) as conn:
        row = await (await conn.execute(
            "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.oid = to_regclass(%s) OR c.oid IN (SELECT inhrelid FROM pg_inherits "
            "WHERE inhparent = to_regclass(%s)) OR c.oid IN (SELECT i2.inhrelid FROM "
            "pg_inherits i1 JOIN pg_inherits i2 ON i2.inhparent = i1.inhrelid "
            "WHERE i1.inhparent = to_regclass(%s))", (table, table, table))).fetchone()
        return int(row[0]) if row else 0


async def database_bytes(db: Db) -> int:
    async with connection(db) as conn:
        row = await (await conn.execute("SELECT pg_database_size(current_database())")).fetchone()
        return int(row[0]) if row else 0


async def last_inspection(db: Db) -> tuple[datetime, dict[str, int]] | None:
    """When the last inspection ran and the table sizes it found."""
    async with connection(db) as conn:
        row = await (await conn.execute(
            "SELECT made_at, table_bytes FROM inspection_reports ORDER BY made_at DESC LIMIT 1"
        )).fetchone()
        return (row[0], row[1] or {}) if row else None


async def pages_per_worker(db: Db) -> list[tuple[str, int, Any]]:
    """(worker, pages staged, mean latency ms) over the last 7 days, busiest first."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT worker, count(*), round(avg(elapsed_ms)::numeric, 1) FROM staging "
            "WHERE fetched_at > now() - interval '7 days' GROUP BY 1 ORDER BY 2 DESC")
        return [tuple(r) for r in await cur.fetchall()]


async def attempts_histogram(db: Db) -> list[tuple[int, int]]:
    """(attempts, tasks) of the tasks touched in the last 7 days."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT attempts, count(*) FROM tasks WHERE updated_at > now() - interval '7 days' "
            "GROUP BY 1 ORDER BY 1")
        return [(int(a), int(n)) for a, n in await cur.fetchall()]


async def retrying_sources(db: Db, limit: int = 5
                           ) -> list[tuple[str, float, int]]:
    """(source, share of its tasks retried, tasks) of the sources that retry most."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, count(*) FILTER (WHERE attempts > 1)::float / count(*), count(*) "
            "FROM tasks WHERE updated_at > now() - interval '7 days' GROUP BY 1 "
            "HAVING count(*) FILTER (WHERE attempts > 1) > 0 ORDER BY 2 DESC LIMIT %s", (limit,))
        return [(str(s), float(share), int(n)) for s, share, n in await cur.fetchall()]


async def store_report(db: Db, made_at: datetime, sizes: dict[str, int],
                       report: str) -> None:
    async with connection(db) as conn:
        await conn.execute("INSERT INTO inspection_reports (made_at, table_bytes, report) "
                           "VALUES (%s, %s, %s)", (made_at, json.dumps(sizes), report))
