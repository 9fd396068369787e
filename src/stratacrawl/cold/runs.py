"""Crawl runs: the identity of one crawl process, and whether it is still alive.

A worker *name* (``--worker-id``) is what people read; a *run* is one process with that
name. Leases, slots and heartbeats belong to the run: ``<name>~<random>``. A run beats
in ``crawl_runs`` every ``BEAT_S`` on its lease-upkeep connection; one whose beat is older
than ``DEAD_AFTER`` (or that ended) is dead, and the ledger's reclaim gives its leases
back at once instead of after a whole lease time. PostgreSQL's clock decides, so the
hosts' clocks do not matter.
"""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from psycopg_pool import AsyncConnectionPool

BEAT_S = 2.0
DEAD_AFTER = timedelta(seconds=15)
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
        async with self.pool.connection() as conn:
            await conn.execute(
                "DELETE FROM crawl_runs WHERE heartbeat_at < now() - %s", (KEEP_ENDED,))
            await conn.execute(
                "INSERT INTO crawl_runs (run_id, worker, host, pid) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (run_id) DO UPDATE SET heartbeat_at = now(), ended_at = NULL",
                (run_id, worker_of(run_id), socket.gethostname(), os.getpid()))

    async def beat(self, run_id: str) -> None:
        async with self.pool.connection() as conn:
            await conn.execute("UPDATE crawl_runs SET heartbeat_at = now() WHERE run_id = %s",
                               (run_id,))

    async def end(self, run_id: str) -> None:
        """This run is over: what it still leases goes back at the next reclaim."""
        async with self.pool.connection() as conn:
            await conn.execute("UPDATE crawl_runs SET ended_at = now() WHERE run_id = %s",
                               (run_id,))
