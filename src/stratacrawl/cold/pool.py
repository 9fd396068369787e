"""An async psycopg connection pool for the cold tier, and the one way the cold tier's
async functions are called.

Every such function takes ``db`` first: the pool, or a connection the caller already
holds — to run several reads on one connection, or to make the call part of the caller's
transaction. Functions that only make sense as one step of a caller's transaction (a
claim with ``FOR UPDATE SKIP LOCKED``, the staging landing, a record upsert) take ``conn``
instead, and say so.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold import fingerprints
from stratacrawl.cold.db import libpq_url

fingerprints.register()   # every connection loads a fingerprint as hex (see there)

PLANNER = "-c random_page_cost=1.1"

Db = AsyncConnectionPool | AsyncConnection[Any]


@contextlib.asynccontextmanager
async def connection(db: Db) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection of ``db`` for the block: lent by the pool, or the caller's own."""
    if isinstance(db, AsyncConnection):
        yield db
    else:
        async with db.connection() as conn:
            yield conn


def make_pool(url: str, *, min_size: int = 1, max_size: int = 8,
              name: str = "stratacrawl") -> AsyncConnectionPool:
    """Open it with ``async with make_pool(...) as pool``.

    Connections are in autocommit mode: a single statement is one round trip; several
    statements that must hold together run in ``async with conn.transaction()``. Sessions
    run in UTC, so day partitions and record days do not depend on the server's time zone.

    ``random_page_cost`` is set for a database whose working set is in memory (the
    default, 4, prices a random read as a disk seek): the batch statements look a
    thousand rows up by key (``id = ANY(…)``, ``url_hash = ANY(…)``), and at the default
    the planner scanned the whole ledger or URL-state table for them (16 ms against 3 ms
    for the index, per 1,000 rows of 50,000).
    """
    return AsyncConnectionPool(libpq_url(url), min_size=min_size, max_size=max_size, open=False,
                               name=name, timeout=10.0,
                               kwargs={"autocommit": True, "options": f"-c TimeZone=UTC {PLANNER}"})


async def ping(pool: AsyncConnectionPool, wait_s: float) -> None:
    """One round trip to PostgreSQL through the pool, waiting at most ``wait_s`` for a
    connection (raises when it does not answer)."""
    async with pool.connection(timeout=wait_s) as conn:
        await conn.execute("SELECT 1")

