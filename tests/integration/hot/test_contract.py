"""The hot tier's contract, kept by a single Redis and by a three-node Redis Cluster
alike (every test runs over both, from the ``hot_comps`` fixture): URL state, the Bloom
filter, the parse cache, eviction and write-back, and a whole crawl. On the cluster each
test also checks that the keys spread over the nodes (the paths whose keys span slots).
The frontier's claims run over both too (``tests/integration/frontier``)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest
import redis

from stratacrawl.hot import keys
from stratacrawl.hot.bloom import BloomFilter, BloomSpec
from stratacrawl.hot.client import key_count, mget, used_memory_bytes
from stratacrawl.hot.url_state import key as hot_key
from stratacrawl.sim import SimulatorThread
from stratacrawl.tiers.eviction import evict_hot
from stratacrawl.tiers.sinking import write_back_access
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import crawl_every_item, small_site

pytestmark = pytest.mark.integration


def fingerprints(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def keys_per_node(c: Components, pattern: str) -> list[int] | None:
    """Keys matching ``pattern`` on each primary of a cluster; ``None`` on a single Redis."""
    if not c.settings.redis_cluster:
        return None
    client = redis.RedisCluster.from_url(c.runtime.endpoints.redis_url)
    try:
        return [len(list(client.scan_iter(match=pattern, count=1000, target_nodes=node)))
                for node in client.get_primaries()]
    finally:
        client.close()


def flush_scripts(c: Components) -> None:
    """Every server forgets its loaded Lua scripts, as after a restart."""
    url = c.runtime.endpoints.redis_url
    client = (redis.RedisCluster if c.settings.redis_cluster else redis.Redis).from_url(url)
    client.script_flush()  # on a cluster redis-py sends it to every primary
    client.close()


async def test_url_state_of_a_batch(hot_comps: Components) -> None:
    hot = hot_comps.hot_urls
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
    per_node = keys_per_node(hot_comps, "sc:u:*")
    if per_node is not None:
        assert len(per_node) == 3 and min(per_node) > 500 and sum(per_node) == 2500

async def test_last_crawled_of_a_batch_known_and_unknown(hot_comps: Components) -> None:
    """What dedup asks of every URL of a batch (one field, one script call per 1,000 URLs
    on a single Redis): known URLs' last crawl, None for the rest, in order."""
    hot = hot_comps.hot_urls
    fps = fingerprints(2300, seed=11)
    await hot.record([], {fp: {"lc": 100.0 + i} for i, fp in enumerate(fps[::2])})
    await hot.record([], {fps[1]: {"st": 200}})   # state, but never crawled
    want = [100.0 + i // 2 if i % 2 == 0 else None for i in range(len(fps))]
    assert await hot.last_crawled_many(fps) == want
    got = await hot.get_many(fps)
    assert [g.last_crawled if g else None for g in got] == want
    assert got[1] is not None and got[1].status == 200 and got[3] is None
    flush_scripts(hot_comps)                       # a server that lost its scripts
    assert await hot.last_crawled_many(fps[:4]) == want[:4]


async def test_fetched_url_state_packed_without_a_mapping(hot_comps: Components) -> None:
    """A staging flush's URLs: absent validators are left as they were, a validator
    holding the unit separator (the fields' delimiter) keeps the rest of its text."""
    hot = hot_comps.hot_urls
    fps = fingerprints(1200, seed=9)
    await hot.record([], {fp: {"et": '"old"', "lm": "Mon, 01 Dec 2026 00:00:00 GMT"}
                          for fp in fps})
    await hot.put_fetched([(fp, 1764650000.25, None if i % 2 else 'W/"a\x1fb"', None,
                            f"{i:032x}", 200 if i % 3 else None)
                           for i, fp in enumerate(fps)])
    got = await hot.get_many(fps)
    assert [g.last_crawled if g else None for g in got] == [1764650000.25] * len(fps)
    assert [g.etag for g in got if g] == ['W/"ab"' if i % 2 == 0 else '"old"'
                                          for i in range(len(fps))]
    assert {g.last_modified for g in got if g} == {"Mon, 01 Dec 2026 00:00:00 GMT"}
    assert [g.content_hash for g in got if g] == [f"{i:032x}" for i in range(len(fps))]
    assert [g.status for g in got if g] == [200 if i % 3 else None for i in range(len(fps))]



async def test_url_state_script_loaded_again_on_a_server_that_lost_it(
        hot_comps: Components) -> None:
    hot = hot_comps.hot_urls
    await hot.record([], {fp: {"st": 200} for fp in fingerprints(50)})
    flush_scripts(hot_comps)
    fps = fingerprints(300, seed=8)
    await hot.record([], {fp: {"st": 201} for fp in fps})
    assert {g.status for g in await hot.get_many(fps)} == {201}


async def test_bloom_filter_in_shards(hot_comps: Components) -> None:
    bloom = BloomFilter(redis=hot_comps.redis, name="t",
                        spec=BloomSpec.for_capacity(200_000, shards=6))
    fps = fingerprints(12_000)
    assert not any(await bloom.check_and_add(fps))
    assert all(await bloom.check_and_add(fps))
    assert await bloom.contains(fingerprints(10, seed=99)) == [False] * 10
    assert (await bloom.check_and_add_ready(fps[:3])) == ([True] * 3, False)
    await bloom.mark_ready()
    assert (await bloom.check_and_add_ready(fps[:3])) == ([True] * 3, True)
    flush_scripts(hot_comps)
    assert all(await bloom.check_and_add(fps[:500]))  # the script is loaded again
    per_node = keys_per_node(hot_comps, "sc:bloom:*")
    if per_node is not None:
        assert sum(1 for n in per_node if n) >= 2
    await bloom.clear()
    assert not await bloom.exists() and not await bloom.is_ready()


async def test_bloom_filter_rebuilt_in_bulk_keeps_bits_added_meanwhile(
        hot_comps: Components) -> None:
    """``add_all`` (recovery's rebuild) answers as ``check_and_add`` would, in shards
    spread over the cluster, and ORs into what crawlers added while it ran."""
    bloom = BloomFilter(redis=hot_comps.redis, name="bulk",
                        spec=BloomSpec.for_capacity(100_000, shards=3))
    meanwhile = fingerprints(2_000, seed=5)
    known = fingerprints(30_000)

    async def chunks() -> AsyncIterator[list[str]]:
        for i in range(0, len(known), 7_000):
            if i == 7_000:
                await bloom.check_and_add(meanwhile)
            yield known[i:i + 7_000]

    assert await bloom.add_all(chunks()) == 30_000
    assert all(await bloom.contains(known)) and all(await bloom.contains(meanwhile))
    fresh = await bloom.contains(fingerprints(20_000, seed=77))
    assert sum(fresh) < 20_000 * 0.005        # 0.1 % target: the bits are where they belong
    assert not await hot_comps.redis.exists(*[f"{bloom.key(s)}:rebuild" for s in range(3)])
    # Bit for bit what check_and_add writes (Redis' bit order: offset 0 = a byte's top bit).
    one_by_one = BloomFilter(redis=hot_comps.redis, name="each", spec=bloom.spec)
    await one_by_one.check_and_add(known + meanwhile)
    for s in range(3):
        bulk = await hot_comps.redis.get(bloom.key(s))
        each = await hot_comps.redis.get(one_by_one.key(s))
        assert bulk.rstrip(b"\0") == each.rstrip(b"\0")
    await bloom.clear()
    await one_by_one.clear()


async def test_parse_cache_reads_keys_of_many_sources(hot_comps: Components) -> None:
    r = hot_comps.redis
    a, b = keys.parse_cache("a", "r1", "c1"), keys.parse_cache("b", "r1", "c2")
    missing = keys.parse_cache("zz", "r1", "c3")
    await r.set(a, "x")
    await r.set(b, "y")
    assert await mget(r, [a, missing, b]) == [b"x", None, b"y"]


async def test_throttles_of_many_sources_read_at_once(hot_comps: Components) -> None:
    """The crawl's report reads every source's throttle in one pipeline: on a cluster the
    sources' keys are on different nodes."""
    p = hot_comps.politeness
    ids = [f"t{i}" for i in range(12)]
    for sid in ids[::3]:
        await p.throttle(sid, rate=10.0, concurrency=2, retry_after_s=None)
    rates = await p.effective_rates(dict.fromkeys(ids, 10.0))
    assert set(rates) == set(ids[::3])
    assert all(r == pytest.approx(5.0, abs=0.1) for r, _ in rates.values())
    spread = keys_per_node(hot_comps, "sc:{t*}:throttle")
    assert spread is None or sum(1 for n in spread if n) > 1, spread

    # A server that lost its scripts (restarted) is given the read script again.
    await hot_comps.redis.script_flush()
    again = await p.effective_rates(dict.fromkeys(ids, 10.0))
    assert set(again) == set(rates)
    assert all(r == pytest.approx(5.0, abs=0.1) for r, _ in again.values())


async def test_eviction_and_write_back_see_every_key(hot_comps: Components) -> None:
    c = hot_comps
    fps = fingerprints(3000)
    async with c.pool.connection() as conn:  # cold's rows for these URLs: never accessed
        await conn.execute(
            "INSERT INTO url_state (url_hash, url, source_id, hits, last_access) "
            "SELECT fp, 'https://x.test/' || fp, 's', 0, to_timestamp(0) "
            "FROM unnest(%s::uuid[]) AS fp", (fps,))
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


async def test_a_crawl_stages_every_item(hot_comps: Components) -> None:
    specs = small_site(3, hosts())
    with SimulatorThread(specs) as st:
        await crawl_every_item(hot_comps, st, specs)
    on_nodes = keys_per_node(hot_comps, "sc:u:*")
    if on_nodes is not None:  # URL state on every node; each source paced by its own key
        assert sum(1 for n in on_nodes if n) == 3
        assert sum(keys_per_node(hot_comps, "sc:{*}:pace") or []) == 3
