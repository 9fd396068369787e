"""The weekly inspection: trends nobody sees day to day.

7-day success trend per source, backlog growth (tasks created vs finished per day), table
growth and a disk forecast (sizes kept from each inspection), worker balance (pages per
worker), and the retry distribution with the sources that keep retrying. The report is
Markdown, stored in ``inspection_reports`` and written to a file.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold import inspection as q

TABLES = ("tasks", "url_state", "staging", "records", "record_items", "validation_results",
          "alerts", "alert_snapshots", "page_snapshots")


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


async def inspect(pool: AsyncConnectionPool, out_dir: Path, now: datetime | None = None) -> Path:
    now = now or datetime.now(UTC)
    md = [f"# Weekly inspection, {now:%Y-%m-%d %H:%M} UTC", ""]
    async with pool.connection() as conn:
        trend: dict[str, list[str]] = {}
        for sid, d, ok, total in await q.success_by_day(conn):
            trend.setdefault(sid, []).append(f"{d:%m-%d} {ok / total:.1%}")
        md += ["## Success trend (7 days)", "", "| source | per day |", "| --- | --- |",
               *(f"| {sid} | {' · '.join(days)} |" for sid, days in sorted(trend.items())), ""]

        md += ["## Backlog growth", "", "| day | tasks created | finished | net |",
               "| --- | --- | --- | --- |"]
        for d, created, finished in await q.backlog_by_day(conn):
            md.append(f"| {d} | {created} | {finished} | {int(created) - int(finished):+d} |")
        md.append("")

        sizes = {table: await q.table_bytes(conn, table) for table in TABLES}
        prev = await q.last_inspection(conn)
        db_size = await q.database_bytes(conn)
        md += ["## Tables", "", "| table | size | growth since last inspection |",
               "| --- | --- | --- |"]
        weekly_growth = 0.0
        for table, size in sizes.items():
            before = prev[1].get(table) if prev else None
            growth = "first inspection" if before is None else _mb(size - before)
            md.append(f"| {table} | {_mb(size)} | {growth} |")
        if prev:
            days = max((now - prev[0]).total_seconds() / 86400, 1 / 24)
            weekly_growth = (sum(sizes.values()) - sum(prev[1].values())) / days * 7
        md += ["", f"Database: {_mb(db_size)}; at the last week's pace "
               f"({_mb(weekly_growth)} a week) it reaches {_mb(db_size + 4 * weekly_growth)} "
               "in 4 weeks." if prev else f"Database: {_mb(db_size)}; the forecast needs a second "
               "inspection.", ""]

        md += ["## Worker balance (pages, 7 days)", "", "| worker | pages | mean ms |",
               "| --- | --- | --- |",
               *(f"| {w} | {n} | {ms} |" for w, n, ms in await q.pages_per_worker(conn)), ""]
        md += ["## Retries", "", "| attempts | tasks |", "| --- | --- |",
               *(f"| {a} | {n} |" for a, n in await q.attempts_histogram(conn)), ""]
        md += ["Sources that keep retrying:", "",
               *(f"- {sid}: {share:.1%} of {n} tasks retried" for sid, share, n in
                 await q.retrying_sources(conn)), ""]
        report = "\n".join(md)
        await q.store_report(conn, now, sizes, report)
    return await asyncio.to_thread(_write, out_dir / f"inspection-{now:%Y-%m-%d}.md", report)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
