"""What only a Redis Cluster (three redis-server nodes in cluster mode) asks of the hot
tier: following a slot that moved, and refusing a client of the wrong kind. The contract
both deployments keep is ``test_contract.py``."""

from __future__ import annotations

import dataclasses
import random

import pytest
import redis

from stratacrawl.errors import ConfigError, ServiceUnavailable
from stratacrawl.hot.bloom import BloomFilter, BloomSpec
from stratacrawl.wiring import Components, Runtime, check_redis, open_components

pytestmark = pytest.mark.integration


def fingerprints(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def keys_per_node(url: str, pattern: str) -> list[int]:
    client = redis.RedisCluster.from_url(url)
    try:
        return [len(list(client.scan_iter(match=pattern, count=1000, target_nodes=node)))
                for node in client.get_primaries()]
    finally:
        client.close()


async def test_bloom_follows_a_slot_moved_under_it(cluster_comps: Components,
                                                   cluster_url: str) -> None:
    """The client's slot map is stale (the slot moved to another node after it was
    read): the node answers MOVED, nothing was applied there, the shard goes again."""
    r = cluster_comps.redis
    bloom = BloomFilter(redis=r, name="moving", spec=BloomSpec.for_capacity(10_000))
    key = bloom.key(0)
    r.get_node_from_key(key)  # the slot map is loaded (when the components opened)
    admin = redis.RedisCluster.from_url(cluster_url)
    try:
        slot = admin.keyslot(key)
        owner = admin.get_node_from_key(key)
        other = next(n for n in admin.get_primaries() if n.name != owner.name)
        other_id = admin.cluster_myid(other)
        for node in admin.get_primaries():  # an empty slot may simply be reassigned
            admin.execute_command("CLUSTER", "SETSLOT", slot, "NODE", other_id,
                                  target_nodes=node)
    finally:
        admin.close()
    assert r.get_node_from_key(key).name == owner.name  # still the old map
    fps = fingerprints(3000)
    assert not any(await bloom.check_and_add(fps))
    assert all(await bloom.check_and_add(fps))


async def test_single_node_client_on_a_cluster_is_refused(cluster_rt: Runtime) -> None:
    cluster_rt.settings.redis_cluster = False
    with pytest.raises(ConfigError, match="STRATACRAWL_REDIS_CLUSTER=true"):
        async with open_components(cluster_rt):
            pass
    with pytest.raises(ServiceUnavailable, match="STRATACRAWL_REDIS_CLUSTER=true"):
        await check_redis(cluster_rt)


async def test_cluster_client_on_a_single_node_is_refused(rt: Runtime) -> None:
    settings = rt.settings.model_copy(update={"redis_cluster": True})
    db0 = rt.endpoints.redis_url.rsplit("/", 1)[0] + "/0"
    with pytest.raises(ServiceUnavailable, match=r"(?i)cluster mode is not enabled"):
        await check_redis(Runtime(settings, dataclasses.replace(rt.endpoints, redis_url=db0)))
    with pytest.raises(ServiceUnavailable, match="'db' must be 0"):  # clusters have one DB
        await check_redis(Runtime(settings, rt.endpoints))
