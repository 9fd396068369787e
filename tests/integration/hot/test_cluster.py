"""The hot tier on a real Redis Cluster (three redis-server nodes in cluster mode): every
path whose keys span slots, and a whole crawl."""

from __future__ import annotations

import dataclasses
import random

import pytest
import redis

from stratacrawl.components import Components, open_components
from stratacrawl.errors import ConfigError, ServiceUnavailable
from stratacrawl.frontier.bloom import BloomFilter, BloomSpec
from stratacrawl.hot.client import key_count, mget, used_memory_bytes
from stratacrawl.hot.url_state import HotURLState
from stratacrawl.hot.url_state import key as hot_key
from stratacrawl.runtime import Runtime, check_redis
from stratacrawl.sim import SimulatorThread
from stratacrawl.tiers.eviction import evict_hot
from stratacrawl.tiers.sinking import write_back_access
from tests.integration.fetch.test_crawl import crawl_every_item, small_site

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


async def test_url_state_of_a_batch_spans_every_node(cluster_comps: Components,
                                                    cluster_url: str) -> None:
    hot: HotURLState = cluster_comps.hot_urls
    fps = fingerprints(2500)
    await hot.record([], {fp: {"lc": 100.0, "st": 200, "et": f'"{fp[:6]}"', "lm": None}
                          for fp in fps}, now=50.0)
    await hot.record(fps[:700], {fps[-1]: {"st": 304}}, now=60.0)
    got = await hot.get_many(fps)
    assert all(g is not None and g.last_crawled == 100.0 and g.etag == f'"{fp[:6]}"'
               for g, fp in zip(got, fps, strict=True))
    assert [g.hits for g in got[:700]] == [1] * 700 and {g.hits for g in got[700:]} == {0}
    assert {g.last_access for g in got[:700]} == {60.0} and got[-1].status == 304
    assert got[0].last_modified is None
    per_node = keys_per_node(cluster_url, "sc:u:*")
    assert len(per_node) == 3 and min(per_node) > 500 and sum(per_node) == 2500


async def test_url_state_script_loaded_again_on_a_node_that_lost_it(
        cluster_comps: Components, cluster_url: str) -> None:
    hot: HotURLState = cluster_comps.hot_urls
    await hot.record([], {fp: {"st": 200} for fp in fingerprints(50)})
    client = redis.RedisCluster.from_url(cluster_url)
    client.script_flush()  # on every primary (redis-py routes it so): as after restarts
    client.close()
    fps = fingerprints(300, seed=8)
    await hot.record([], {fp: {"st": 201} for fp in fps})
    assert {g.status for g in await hot.get_many(fps)} == {201}


async def test_bloom_shards_on_several_nodes(cluster_comps: Components,
                                             cluster_url: str) -> None:
    bloom = BloomFilter(redis=cluster_comps.redis, name="t",
                        spec=BloomSpec.for_capacity(200_000, shards=6))
    fps = fingerprints(12_000)
    assert not any(await bloom.check_and_add(fps))
    assert all(await bloom.check_and_add(fps))
    assert await bloom.contains(fingerprints(10, seed=99)) == [False] * 10
    assert (await bloom.check_and_add_ready(fps[:3])) == ([True] * 3, False)
    await bloom.mark_ready()
    assert (await bloom.check_and_add_ready(fps[:3])) == ([True] * 3, True)
    assert sum(1 for n in keys_per_node(cluster_url, "sc:bloom:*") if n) >= 2
    await bloom.clear()
    assert not await bloom.exists() and not await bloom.is_ready()


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


async def test_parse_cache_reads_keys_of_many_sources(cluster_comps: Components) -> None:
    r = cluster_comps.redis
    await r.set("sc:pc:{a}:1", "x")
    await r.set("sc:pc:{b}:2", "y")
    assert await mget(r, ["sc:pc:{a}:1", "sc:pc:{zz}:3", "sc:pc:{b}:2"]) == [b"x", None, b"y"]


async def test_eviction_and_write_back_scan_every_node(cluster_comps: Components) -> None:
    c = cluster_comps
    fps = fingerprints(3000)
    async with c.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO url_state (url_hash, url, source_id, hits, last_access) "
            "SELECT fp, 'https://x.test/' || fp, 's', 0, to_timestamp(0) "
            "FROM unnest(%s::text[]) AS fp", (fps,))
    await c.hot_urls.record([], {fp: {"h": i % 50, "la": 1000.0 + i}
                                 for i, fp in enumerate(fps)})
    assert await write_back_access(c.redis, c.pool, batch=500) == 3000
    async with c.pool.connection() as conn:
        hits = dict(await (await conn.execute(
            "SELECT url_hash, hits FROM url_state")).fetchall())
    assert all(hits[fp] == i % 50 for i, fp in enumerate(fps))
    used = await used_memory_bytes(c.redis) / 1e6
    before = await key_count(c.redis)
    stats = await evict_hot(c.redis, c.pool, budget_mb=used - 0.05, sample=1000, max_rounds=3,
                            now=5000.0)
    assert stats.evicted > 0 and await key_count(c.redis) == before - stats.evicted
    gone = [fp for fp in fps if not await c.redis.exists(hot_key(fp))]
    assert len(gone) == stats.evicted


async def test_crawl_on_a_cluster_stages_every_item(cluster_comps: Components,
                                                   cluster_url: str) -> None:
    specs = small_site(3, 120)
    with SimulatorThread(specs) as st:
        await crawl_every_item(cluster_comps, st, specs)
    # URL state on every node; each source paced through its own key.
    assert sum(1 for n in keys_per_node(cluster_url, "sc:u:*") if n) == 3
    assert sum(keys_per_node(cluster_url, "sc:{*}:pace")) == 3


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
