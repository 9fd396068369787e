"""Real tiers for a benchmark: configured servers or embedded ones, a fresh database,
its own Redis DB and index prefix, so a benchmark never touches a crawl's data."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import AsyncIterator, Iterator

import psycopg
import redis

from stratacrawl.cold.db import libpq_url
from stratacrawl.components import Components, open_components
from stratacrawl.runtime import Runtime
from stratacrawl.services import Endpoints, Services
from stratacrawl.settings import Settings

BENCH_REDIS_DBS = {"dedup": 13, "frontier": 14, "fetch": 12, "tiers": 11, "recovery": 9, "clean": 8,
                   "validate": 7, "monitor": 6}


def _with_db(url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextlib.contextmanager
def bench_runtime(name: str, **overrides: object) -> Iterator[Runtime]:
    """Tiers for benchmark ``name``: its own database and Redis DB (benchmarks may overlap)."""
    bench_db = f"stratacrawl_bench_{name}"
    base = Settings()
    with Services(base) as ep:
        admin = libpq_url(ep.database_url)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{bench_db}"')
        redis_url = ep.redis_url.rsplit("/", 1)[0] + f"/{BENCH_REDIS_DBS.get(name, 10)}"
        redis.Redis.from_url(redis_url).flushdb()
        settings = base.model_copy(update={"es_index_prefix": f"bench_{name}_", **overrides})
        endpoints = Endpoints(redis_url, ep.elasticsearch_url, _with_db(admin, bench_db),
                              ep.embedded)
        try:
            yield Runtime(settings, endpoints)
        finally:
            redis.Redis.from_url(redis_url).flushdb()


@contextlib.asynccontextmanager
async def bench_components(rt: Runtime) -> AsyncIterator[Components]:
    await rt.prepare()
    async with open_components(rt) as c:
        yield c


def rss_mb(pid: int | None = None) -> float:
    """Resident set size now (MB), from /proc."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
