"""Crawl runs: the identity of one crawl process, and whether it is still alive.

A worker *name* (``--worker-id``) is what people read; a *run* is one process with that
name. Leases, slots and heartbeats belong to the run: ``<name>~<random>``. A run beats
in ``crawl_runs`` every ``BEAT_S`` on its lease-upkeep connection; one whose beat is older
than ``DEAD_AFTER`` (or that ended) is dead, and the ledger's reclaim gives its leases
back at once instead of after a whole lease time. PostgreSQL's clock decides, so the
hosts' clocks do not matter.

Faster than the heartbeat: a run also holds a session-level advisory lock on that same
connection (its key in ``crawl_runs.lock_key``). PostgreSQL drops a session's locks when
its connection ends, so a run killed with -9 is known dead the moment its connection
closes (:data:`LOCK_FREE`); the heartbeat stays the fallback (a hung process, a run of an
older version).
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from psycopg_pool import AsyncConnectionPool

BEAT_S = 2.0
DEAD_AFTER = timedelta(seconds=15)
# After PostgreSQL restarts, every run's lock is gone until its next beat takes it again
# (within BEAT_S): a run judges others by their locks only once it has itself beaten for
# longer than that without a gap.
LOCK_STEADY_S = BEAT_S + 0.25
# SQL: the run ``r`` (a crawl_runs row) took a lock that no session holds now. A bigint
# advisory key shows in pg_locks as its high and low 32 bits (classid, objid; objsubid 1).
LOCK_FREE = (
    "(r.lock_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE "
    "l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) AND "
    "l.classid = ((r.lock_key >> 32) & 4294967295)::oid AND "
    "l.objid = (r.lock_key & 4294967295)::oid))")
KEEP_ENDED = timedelta(days=1)  # rows of ended or dead runs are deleted after this


def new_run_id(worker: str) -> str:
    return f"{worker}~{uuid.uuid4().hex[:8]}"


def worker_of(run_id: str) -> str:
    """The worker name of a run id (a plain name is its own worker)."""
    return run_id.split("~", 1)[0]


class Runs:
    """``crawl_runs``: start, beat, end."""

    def __init__(self, *, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    async def start(self, run_id: str) -> None:
        """The run lives: its row, and its advisory lock taken on this pool's connection
        (again after a reconnect; taking it twice in one session is harmless). Call it
        on the connection that stays open while the run lives (the lease upkeep's)."""
        async with self.pool.connection() as conn:
            await conn.execute(
                "DELETE FROM crawl_runs WHERE heartbeat_at < now() - %s", (KEEP_ENDED,))
            row = await (await conn.execute(
                "SELECT k, pg_try_advisory_lock(k) FROM (SELECT hashtextextended(%s, 0) AS k) "
                "AS key", (run_id,))).fetchone()
            key = int(row[0]) if row and row[1] else None
            await conn.execute(
                "INSERT INTO crawl_runs (run_id, worker, host, pid, lock_key) VALUES "
                "(%s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = now(), "
                "ended_at = NULL, lock_key = EXCLUDED.lock_key",
                (run_id, worker_of(run_id), socket.gethostname(), os.getpid(), key))

    async def beat(self, run_id: str) -> None:
        async with self.pool.connection() as conn:
            await conn.execute("UPDATE crawl_runs SET heartbeat_at = now() WHERE run_id = %s",
                               (run_id,))

    async def end(self, run_id: str) -> None:
        """This run is over: what it still leases goes back at the next reclaim."""
        async with self.pool.connection() as conn:
            await conn.execute("UPDATE crawl_runs SET ended_at = now() WHERE run_id = %s",
                               (run_id,))
