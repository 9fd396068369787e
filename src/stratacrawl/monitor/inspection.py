"""The weekly inspection: trends nobody sees day to day.

7-day success trend per source, backlog growth (tasks created vs finished per day), table
growth and a disk forecast (sizes kept from each inspection), worker balance (pages per
worker), and the retry distribution with the sources that keep retrying. The report is
Markdown, stored in ``inspection_reports`` and written to a file.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from psycopg_pool import AsyncConnectionPool

TABLES = ("tasks", "url_state", "staging", "records", "record_keys", "validation_results",
          "alerts", "alert_snapshots", "page_snapshots")


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


async def inspect(pool: AsyncConnectionPool, out_dir: Path, now: datetime | None = None) -> Path:
    now = now or datetime.now(UTC)
    md = [f"# Weekly inspection, {now:%Y-%m-%d %H:%M} UTC", ""]
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT source_id, finished_at::date AS d, count(*) FILTER (WHERE state = 'SUCCEEDED'), "
            "count(*) FROM tasks WHERE finished_at > now() - interval '7 days' "
            "AND state IN ('SUCCEEDED', 'FAILED') GROUP BY 1, 2 ORDER BY 1, 2")
        trend: dict[str, list[str]] = {}
        for sid, d, ok, total in await cur.fetchall():
            trend.setdefault(sid, []).append(f"{d:%m-%d} {ok / total:.1%}")
        md += ["## Success trend (7 days)", "", "| source | per day |", "| --- | --- |",
               *(f"| {sid} | {' · '.join(days)} |" for sid, days in sorted(trend.items())), ""]

        cur = await conn.execute(
            "SELECT d, sum(created), sum(finished) FROM ("
            " SELECT created_at::date AS d, 1 AS created, 0 AS finished FROM tasks "
            "  WHERE created_at > now() - interval '7 days' UNION ALL "
            " SELECT finished_at::date, 0, 1 FROM tasks WHERE finished_at > now() - interval '7 days'"
            ") x GROUP BY d ORDER BY d")
        md += ["## Backlog growth", "", "| day | tasks created | finished | net |",
               "| --- | --- | --- | --- |"]
        for d, created, finished in await cur.fetchall():
            md.append(f"| {d} | {created} | {finished} | {int(created) - int(finished):+d} |")
        md.append("")

        sizes: dict[str, int] = {}
        for table in TABLES:
            row = await (await conn.execute(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "WHERE c.oid = to_regclass(%s) OR c.oid IN (SELECT inhrelid FROM pg_inherits "
                "WHERE inhparent = to_regclass(%s)) OR c.oid IN (SELECT i2.inhrelid FROM "
                "pg_inherits i1 JOIN pg_inherits i2 ON i2.inhparent = i1.inhrelid "
                "WHERE i1.inhparent = to_regclass(%s))", (table, table, table))).fetchone()
            sizes[table] = int(row[0]) if row else 0
        prev = await (await conn.execute(
            "SELECT made_at, table_bytes FROM inspection_reports ORDER BY made_at DESC LIMIT 1"
        )).fetchone()
        db_size = int((await (await conn.execute(
            "SELECT pg_database_size(current_database())")).fetchone() or (0,))[0])
        md += ["## Tables", "", "| table | size | growth since last inspection |",
               "| --- | --- | --- |"]
        weekly_growth = 0.0
        for table, size in sizes.items():
            before = (prev[1] or {}).get(table) if prev else None
            growth = "first inspection" if before is None else _mb(size - before)
            md.append(f"| {table} | {_mb(size)} | {growth} |")
        if prev:
            days = max((now - prev[0]).total_seconds() / 86400, 1 / 24)
            weekly_growth = (sum(sizes.values()) - sum((prev[1] or {}).values())) / days * 7
        md += ["", f"Database: {_mb(db_size)}; at the last week's pace "
               f"({_mb(weekly_growth)} a week) it reaches {_mb(db_size + 4 * weekly_growth)} "
               "in 4 weeks." if prev else f"Database: {_mb(db_size)}; the forecast needs a second "
               "inspection.", ""]

        cur = await conn.execute(
            "SELECT worker, count(*), round(avg(elapsed_ms)::numeric, 1) FROM staging "
            "WHERE fetched_at > now() - interval '7 days' GROUP BY 1 ORDER BY 2 DESC")
        md += ["## Worker balance (pages, 7 days)", "", "| worker | pages | mean ms |",
               "| --- | --- | --- |",
               *(f"| {w} | {n} | {ms} |" for w, n, ms in await cur.fetchall()), ""]

        cur = await conn.execute(
            "SELECT attempts, count(*) FROM tasks WHERE updated_at > now() - interval '7 days' "
            "GROUP BY 1 ORDER BY 1")
        md += ["## Retries", "", "| attempts | tasks |", "| --- | --- |",
               *(f"| {a} | {n} |" for a, n in await cur.fetchall()), ""]
        cur = await conn.execute(
            "SELECT source_id, count(*) FILTER (WHERE attempts > 1)::float / count(*), count(*) "
            "FROM tasks WHERE updated_at > now() - interval '7 days' GROUP BY 1 "
            "HAVING count(*) FILTER (WHERE attempts > 1) > 0 ORDER BY 2 DESC LIMIT 5")
        md += ["Sources that keep retrying:", "",
               *(f"- {sid}: {share:.1%} of {n} tasks retried" for sid, share, n in
                 await cur.fetchall()), ""]
        report = "\n".join(md)
        await conn.execute("INSERT INTO inspection_reports (made_at, table_bytes, report) "
                           "VALUES (%s, %s, %s)", (now, json.dumps(sizes), report))
    return await asyncio.to_thread(_write, out_dir / f"inspection-{now:%Y-%m-%d}.md", report)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
