"""A scratch set of tiers on the configured (or embedded) servers: its own PostgreSQL
database, Redis DB and index prefix, created empty and dropped of its Redis keys after —
for benchmarks and load tests, which must never touch a real crawl's data."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from stratacrawl.cold.db import libpq_url, recreate_database, with_database
from stratacrawl.errors import InUse
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
    settings. One run at a time per ``name``: a second one raises :class:`InUse` (it would
    recreate the first one's database under it, and the first, ending, would stop the
    embedded servers the second uses)."""
    db_name = f"stratacrawl_{name}"
    base = Settings()
    with exclusive(base.state_path / "scratch" / f"{name}.lock",
                   f"the scratch tiers {name!r} (database {db_name}, Redis DB {redis_db})"), \
            Services(base) as ep, contextlib.ExitStack() as stack:
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


@contextlib.contextmanager
def exclusive(path: Path, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the block (released when the process ends,
    however it ends); raises :class:`InUse` naming ``what`` and the holder's pid when
    another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise InUse(f"{what} are in use by another run (pid {holder}; lock {path}): "
                        "wait for it to end") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
