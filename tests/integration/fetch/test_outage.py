"""A pool with every connection lent out is told apart from PostgreSQL away."""

from __future__ import annotations

import asyncio
import logging

import pytest
from psycopg_pool import PoolTimeout

from stratacrawl.cold import db
from stratacrawl.cold.pool import make_pool, ping
from stratacrawl.fetch.outage import Outage
from stratacrawl.services.embedded import free_port

pytestmark = pytest.mark.integration


async def test_a_full_pool_is_not_an_outage_and_a_silent_server_is(
        database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="stratacrawl.fetch.outage")
    async with make_pool(database_url, max_size=1) as pool:
        async def probe() -> None:
            await ping(pool, wait_s=0.2)

        held = pool.connection()
        await held.__aenter__()           # the pool's only connection, lent out
        try:
            with pytest.raises(PoolTimeout) as full:
                await ping(pool, wait_s=0.1)

            answers = Outage(limit_s=5, probes={"PostgreSQL": probe},
                             server_probe=lambda: asyncio.to_thread(db.check, database_url, 2))
            answers.failed(full.value)
            assert answers.down
            assert await answers.recovered()   # at once: the server answers beside the pool
            assert (answers.down, answers.pool_full, answers.outages) == (False, 1, 0)
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert "no PostgreSQL connection was free in the pool" in caplog.text

            silent = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
            away = Outage(limit_s=5, probes={"PostgreSQL": probe},
                          server_probe=lambda: asyncio.to_thread(db.check, silent, 2))
            away.failed(full.value)
            assert not await away.recovered()  # the server does not answer: an outage
            assert (away.down, away.outages) == (True, 1)
            assert "PostgreSQL is not answering" in caplog.text
        finally:
            await held.__aexit__(None, None, None)
        assert await away.recovered()          # its connection back: the pool answers
        assert not away.down
