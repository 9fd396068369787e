"""Drain the spool into staging once PostgreSQL is back (idempotent, file by file)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.staging import ensure_partitions, land
from stratacrawl.staging.spool import Spool

log = logging.getLogger(__name__)


@dataclass
class DamagedFile:
    """A spool file that could not be read, set aside in ``moved_to`` (never loaded)."""

    file: str
    reason: str
    moved_to: str


@dataclass
class DrainReport:
    files: int = 0
    rows: int = 0
    inserted: int = 0      # rows that were not in staging yet
    damaged: list[DamagedFile] = field(default_factory=list)
    stale_tmp: list[str] = field(default_factory=list)   # unfinished writes deleted

    def merge(self, other: DrainReport) -> None:
        self.files += other.files
        self.rows += other.rows
        self.inserted += other.inserted
        self.damaged += other.damaged
        self.stale_tmp += other.stale_tmp

    def summary(self) -> str:
        text = f"{self.rows} rows from {self.files} files"
        if self.damaged:
            text += (f"; {len(self.damaged)} damaged file(s) set aside in "
                     f"{self.damaged[0].moved_to.rsplit('/', 1)[0]}: "
                     + "; ".join(f"{d.file} ({d.reason})" for d in self.damaged))
        if self.stale_tmp:
            text += f"; {len(self.stale_tmp)} unfinished write(s) deleted"
        return text


async def drain(spool: Spool, pool: AsyncConnectionPool) -> DrainReport:
    """Land every spool file (each in its own transaction, deleted once it committed);
    a file that cannot be read is set aside and named, and the rest still load."""
    report = DrainReport(stale_tmp=spool.remove_stale_tmp())
    for path in spool.files():
        try:
            owner, items = spool.read(path)
        except FileNotFoundError:   # another process drained it meanwhile
            continue
        except ValueError as e:
            reason = str(e).removeprefix(f"{path}: ")
            moved = spool.set_aside(path, reason)
            report.damaged.append(DamagedFile(path.name, reason, str(moved)))
            log.warning("spool: %s set aside in %s: %s", path.name, moved.parent, reason)
            continue
        async with pool.connection() as conn:
            await ensure_partitions(conn, {i.fetched_at.date().isoformat() for i in items})
            async with conn.transaction():
                report.inserted += await land(conn, owner, items, idempotent=True)
        path.unlink(missing_ok=True)
        report.files += 1
        report.rows += len(items)
    return report
