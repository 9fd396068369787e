"""Builders the composition root (``wiring``) and the processes it spawns share.

A spawned process — a cleaner of ``clean --processes N`` — builds its stores through the
same functions as the process that spawned it, with its own connection settings, and
imports only what they need: the composition root itself imports every tier's client
(measured: +0.45 CPU-s and +39 MB for each cleaner process).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from psycopg_pool import AsyncConnectionPool

from stratacrawl.clean.parallel import CleanJob, CleanTarget
from stratacrawl.clean.stats import CleanStats
from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.pool import make_pool
from stratacrawl.cold.runs import Runs
from stratacrawl.hot.client import HotRedis, connect
from stratacrawl.sources import SourcesFile, load_sources

if TYPE_CHECKING:  # (trafilatura, lxml: imported where a cleaner is built, never by a crawl)
    from stratacrawl.clean.cleaner import Cleaner


def cleaner(pool: AsyncConnectionPool, redis: HotRedis | None, sources: SourcesFile, *,
            batch_size: int = 200) -> Cleaner:
    """Staging → records for ``sources`` over these clients (``redis`` None: no parse
    cache)."""
    from stratacrawl.clean.cleaner import Cleaner

    return Cleaner(pool=pool, redis=redis, sources=sources, batch_size=batch_size)


@contextlib.asynccontextmanager
async def cleaner_on(target: CleanTarget, *, batch_size: int) -> AsyncIterator[Cleaner]:
    """A cleaner on connections of its own to ``target`` (closed on exit)."""
    from stratacrawl.clean.cleaner import POOL_SIZE

    hot = (connect(target.redis_url, cluster=target.redis_cluster, max_connections=4,
                   pool_wait_s=30.0, connect_timeout_s=target.connect_timeout_s)
           if target.redis_url else contextlib.nullcontext(None))
    async with make_pool(target.database_url, max_size=POOL_SIZE, name="cleaner") as pool, \
            hot as redis:
        yield cleaner(pool, redis, load_sources(target.sources_path), batch_size=batch_size)


def clean_in_child(target: CleanTarget, job: CleanJob) -> CleanStats:
    """What a spawned cleaner process runs: ``job`` with a cleaner of its own."""
    import uvloop

    from stratacrawl.process.tuning import tune_long_running

    tune_long_running()   # an entry point of its own: the cleaner's GC settings

    async def main() -> CleanStats:
        async with cleaner_on(target, batch_size=job.batch_size) as c:
            return await c.run(seconds=job.seconds, follow=job.follow,
                               source_ids=list(job.source_ids or []) or None)

    return uvloop.run(main())


@contextlib.asynccontextmanager
async def upkeep_stores(database_url: str) -> AsyncIterator[tuple[Ledger, Runs]]:
    """The ledger and the runs on a PostgreSQL connection of their own, for a crawl's lease
    upkeep: queued behind a thousand batches for the shared pool, a renewal came too late
    and live workers lost their leases (the load test's duplicates)."""
    async with make_pool(database_url, max_size=1, name="lease-upkeep") as pool:
        yield Ledger(pool=pool), Runs(pool=pool)
