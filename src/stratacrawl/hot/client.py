"""The hot tier's client: one Redis, or a Redis Cluster (``STRATACRAWL_REDIS_CLUSTER``).

Every key that a script or a multi-key command touches together carries the same hash tag
(``sc:{<source>}:…``, ``sc:bloom:{<name>:<shard>}``), so per-source work stays on one
node. What spans keys of many slots — URL state of a batch, the parse cache, scans,
memory — goes through the helpers here, which do the right thing on either kind.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, TypeGuard

import hiredis
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from stratacrawl.errors import ConfigError

# Either kind: the commands the core uses exist on both with the same signatures.
HotRedis = aioredis.Redis | RedisCluster


def is_cluster(redis: HotRedis) -> TypeGuard[RedisCluster]:
    return isinstance(redis, RedisCluster)


def as_cluster(redis: HotRedis) -> RedisCluster:
    """``redis`` where only a cluster client can be (a cluster-only code path)."""
    if not isinstance(redis, RedisCluster):
        raise TypeError("a Redis Cluster client was expected")
    return redis


def as_single(redis: HotRedis) -> aioredis.Redis:
    """``redis`` where only a single-node client can be."""
    if isinstance(redis, RedisCluster):
        raise TypeError("a single-node Redis client was expected")
    return redis


class _HiredisPacking:
    """Commands packed by hiredis (C) instead of redis-py's Python packer, which the async
    client always uses (the sync one has hiredis packing): 0.5 ms against 4.1 ms for a
    script call with 2,000 arguments, a staging flush's hot URL state. Arguments hiredis
    does not take (``None``, ``bool``: errors) go to redis-py's packer, which raises its
    usual error. Floats are written as ``repr`` writes them, as redis-py does."""

    def pack_command(self, *args: Any) -> list[bytes]:
        head = args[0]
        # a command name with its subcommand ("CONFIG GET") goes as separate words
        words = head.encode().split() if isinstance(head, str) else head.split()
        try:
            return [hiredis.pack_command((*words, *args[1:]))]
        except TypeError:
            packed: list[bytes] = super().pack_command(*args)  # type: ignore[misc]
            return packed


_PACKED: dict[type, type] = {
    cls: type(f"Hiredis{cls.__name__}", (_HiredisPacking, cls), {})
    for cls in (aioredis.Connection, aioredis.UnixDomainSocketConnection,
                aioredis.SSLConnection)}


def check_url(url: str) -> None:
    """A :class:`ConfigError` when ``url`` is no Redis URL redis-py can connect to (its own
    parser: a wrong scheme, a bad port or IPv6 address), raised before any client is built."""
    from redis.asyncio.connection import parse_url

    try:
        parse_url(url)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def connect(url: str, *, cluster: bool, max_connections: int, pool_wait_s: float,
            connect_timeout_s: float, **kwargs: Any) -> HotRedis:
    """A client on ``url``: a single node behind a blocking pool (a thousand batches in
    flight wait for one of its connections instead of failing with "too many
    connections"), or a cluster discovered from ``url`` (redis-py's cluster client has
    no blocking pool: ``max_connections`` is a hard cap per node; its connections keep
    redis-py's packer)."""
    if cluster:
        return RedisCluster.from_url(url, max_connections=max_connections,
                                     socket_connect_timeout=connect_timeout_s, **kwargs)
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=pool_wait_s,
        socket_connect_timeout=connect_timeout_s, **kwargs)
    pool.connection_class = _PACKED.get(pool.connection_class, pool.connection_class)
    return aioredis.Redis.from_pool(pool)


async def _per_primary(redis: HotRedis, section: str) -> list[dict[str, Any]]:
    if is_cluster(redis):
        replies = await redis.info(section, target_nodes=RedisCluster.PRIMARIES)
        return list(replies.values())
    return [await redis.info(section)]


async def used_memory_bytes(redis: HotRedis) -> int:
    """Memory used by the hot tier: the node's, or the sum over a cluster's primaries."""
    return sum(int(info["used_memory"]) for info in await _per_primary(redis, "memory"))


async def key_count(redis: HotRedis) -> int:
    if is_cluster(redis):
        sizes = await redis.dbsize(target_nodes=RedisCluster.PRIMARIES)
        return sum(int(v) for v in sizes.values()) if isinstance(sizes, dict) else int(sizes)
    return int(await redis.dbsize())


async def scan_keys(redis: HotRedis, match: str, count: int) -> AsyncGenerator[str, None]:
    """Keys matching ``match`` (every primary of a cluster in turn), as text."""
    async for k in redis.scan_iter(match=match, count=count):
        yield k.decode() if isinstance(k, bytes) else k


async def mget(redis: HotRedis, keys: Sequence[str]) -> list[Any]:
    """Values of ``keys`` in order; on a cluster, one MGET per slot (not atomic)."""
    if is_cluster(redis):
        return list(await redis.mget_nonatomic(list(keys)))
    return list(await redis.mget(keys))


def flush_database(url: str) -> None:
    """Empty the Redis database at ``url`` (a scratch database of tests and benchmarks)."""
    with redis.Redis.from_url(url) as client:
        client.flushdb()


async def server_version(redis: HotRedis) -> str:
    """The Redis version the server (a cluster: the node answering) reports."""
    info = await redis.info("server")
    return str(info.get("redis_version", "?"))


async def check_kind(redis: HotRedis, url: str) -> None:
    """A clear error when a single-node client talks to a cluster node (its commands would
    fail with MOVED for most keys). A cluster client on a single node already failed in
    redis-py ("Cluster mode is not enabled on this node")."""
    if not is_cluster(redis) and (await redis.info("cluster")).get("cluster_enabled"):
        raise ConfigError(f"Redis at {url} is a Redis Cluster node: set "
                          "STRATACRAWL_REDIS_CLUSTER=true")


def connections_in_use(redis: HotRedis) -> int:
    if is_cluster(redis):
        return sum(len(n._connections) - len(n._free) for n in redis.get_nodes())
    return len(getattr(as_single(redis).connection_pool, "_in_use_connections", ()))
