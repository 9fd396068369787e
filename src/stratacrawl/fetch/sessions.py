"""Cookie sessions of the sources, in one place: the HTTP client each source's batches
share in a process, its cookies in hot (shared by every worker, with a TTL), and in cold
when a worker closes (so recovery can put them back after Redis lost them).

A site that starts a session with a cookie check (Set-Cookie, then a redirect back) is
crawled by many workers under one session instead of one per batch.
"""

from __future__ import annotations

import contextlib
import json

import httpx
from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.sessions import save_sessions, unexpired_sessions
from stratacrawl.fetch.fetcher import SourceClient
from stratacrawl.hot import caches
from stratacrawl.hot.client import HotRedis
from stratacrawl.sources import Source

SESSION_TTL_S = 3600


def _jar(client: SourceClient) -> dict[str, str]:
    return {c.name: c.value for c in client.cookies.jar if c.value is not None}


class Sessions:
    """One process's source clients, with their cookies kept in hot and cold."""

    def __init__(self, *, redis: HotRedis, pool: AsyncConnectionPool, worker: str) -> None:
        self.redis = redis
        self.pool = pool
        self.worker = worker
        self.clients: dict[str, SourceClient] = {}

    async def client_for(self, source: Source) -> SourceClient:
        """The source's client, made with the cookies hot holds on first use."""
        client = self.clients.get(source.id)
        if client is None:
            cookies = httpx.Cookies()
            for name, value in (await caches.cookies(self.redis, source.id) or {}).items():
                cookies.set(name, value)
            # Another batch of this source may have made one while we read the cookies:
            # keep that one (a second client would never be closed).
            client = self.clients.get(source.id)
            if client is None:
                client = self.clients[source.id] = SourceClient(source, cookies)
        return client

    async def save(self, source_id: str) -> None:
        """The source's cookies into hot, for the other workers (after each batch)."""
        client = self.clients.get(source_id)
        if client is not None and client.cookies:
            await caches.save_cookies(self.redis, source_id, _jar(client), SESSION_TTL_S)

    async def close(self) -> None:
        """Close every client on every path; the cookies go to cold for recovery."""
        rows = []
        for source_id, client in list(self.clients.items()):
            if jar := _jar(client):
                rows.append((source_id, self.worker, json.dumps(jar)))
            with contextlib.suppress(Exception):
                await client.aclose()
        self.clients.clear()
        if rows:
            with contextlib.suppress(Exception):
                await save_sessions(self.pool, rows)


async def restore_sessions(redis: HotRedis, pool: AsyncConnectionPool) -> int:
    """The newest unexpired session of each source back into hot (unless one is there)."""
    restored = 0
    for source_id, cookies, ttl in await unexpired_sessions(pool):
        ttl_s = int(min(max(ttl, 1.0), SESSION_TTL_S))
        if await caches.save_cookies(redis, source_id, cookies, ttl_s, unless_present=True):
            restored += 1
    return restored
