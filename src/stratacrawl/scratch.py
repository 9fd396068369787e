"""A scratch set of tiers on the configured (or embedded) servers: its own PostgreSQL
database, Redis DB and index prefix, created empty and dropped of its Redis keys after —
for benchmarks and load tests, which must never touch a real crawl's data."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from stratacrawl.cold.db import libpq_url, recreate_database, with_database
from stratacrawl.hot.client import flush_database
from stratacrawl.services.cluster import EmbeddedRedisCluster
from stratacrawl.services.resolve import Endpoints, Services
from stratacrawl.settings import Settings
from stratacrawl.wiring import Runtime


@contextlib.contextmanager
def scratch_runtime(name: str, redis_db: int, redis_cluster: int = 0,
                    **overrides: object) -> Iterator[Runtime]:
    """Database ``stratacrawl_<name>`` (recreated), Redis DB ``redis_db`` (flushed) — or,
    with ``redis_cluster`` nodes, an embedded Redis Cluster started for it (under the
    state folder) and stopped after —, ES index prefix ``<name>_``; ``overrides`` are
    settings."""
    db_name = f"stratacrawl_{name}"
    base = Settings()
    with Services(base) as ep, contextlib.ExitStack() as stack:
        admin = libpq_url(ep.database_url)
        recreate_database(admin, db_name)
        if redis_cluster:
            cluster = EmbeddedRedisCluster(base.state_path / "redis-cluster" / name,
                                           nodes=redis_cluster)
            redis_url = stack.enter_context(cluster).url
            overrides = {**overrides, "redis_cluster": True}
        else:
            redis_url = ep.redis_url.rsplit("/", 1)[0] + f"/{redis_db}"
            flush_database(redis_url)
            stack.callback(flush_database, redis_url)
        settings = base.model_copy(update={"es_index_prefix": f"{name}_", **overrides})
        yield Runtime(settings, Endpoints(redis_url, ep.elasticsearch_url,
                                          with_database(admin, db_name), ep.embedded))
