"""Drain the spool into staging once PostgreSQL is back (idempotent, file by file)."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.staging import ensure_partitions, land
from stratacrawl.staging.spool import Spool


@dataclass
class DrainReport:
    files: int = 0
    rows: int = 0
    inserted: int = 0      # rows that were not in staging yet
    failed: list[str] | None = None


async def drain(spool: Spool, pool: AsyncConnectionPool) -> DrainReport:
    report = DrainReport(failed=[])
    for path in spool.files():
        try:
            owner, items = spool.read(path)
        except Exception as e:  # a damaged file is reported and kept for inspection
            assert report.failed is not None
            report.failed.append(f"{path.name}: {e}")
            continue
        async with pool.connection() as conn:
            await ensure_partitions(conn, {i.fetched_at.date().isoformat() for i in items})
            async with conn.transaction():
                report.inserted += await land(conn, owner, items, idempotent=True)
        path.unlink()
        report.files += 1
        report.rows += len(items)
    return report
