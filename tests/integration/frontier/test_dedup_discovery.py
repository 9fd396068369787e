"""Dedup through Bloom → hot → warm → cold, and discovery's handling of bad input."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.frontier.dedup import Seen
from stratacrawl.hot.bloom import BloomSpec
from stratacrawl.sources import Source
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration

SOURCE = Source(id="s1", seeds=["http://127.0.0.1:9/"], allow=[r"^http://127\.0\.0\.1:9/"],
                follow=[r"/list/\d+$"], items=[r"/item/\d+$"], allow_private_networks=True)


def fp(i: int) -> str:
    return fingerprint(f"http://127.0.0.1:9/item/{i}")


async def set_crawled(c: Components, fps: list[str], when: datetime) -> None:
    async with c.pool.connection() as conn:
        await conn.execute("UPDATE url_state SET last_crawled = %s WHERE url_hash = ANY(%s)",
                           (when, fps))
        await conn.commit()


def test_bloom_geometry_meets_the_memory_target() -> None:
    spec = BloomSpec.for_capacity(10_000_000, 0.001)
    assert spec.bytes / 10_000_000 <= 2.5
    assert spec.expected_fp_rate(10_000_000) <= 0.001


async def test_bloom_false_positive_rate_near_target(comps: Components) -> None:
    comps.bloom.spec = BloomSpec.for_capacity(20_000, 0.01)
    await comps.bloom.clear()
    filling = await comps.bloom.check_and_add([fp(i) for i in range(20_000)])
    assert sum(filling) / len(filling) < 0.01  # false positives grow towards 1 % as it fills
    assert all(await comps.bloom.contains([fp(i) for i in range(0, 20_000, 7)]))
    hits = await comps.bloom.contains([fp(i) for i in range(100_000, 120_000)])
    assert sum(hits) / len(hits) < 0.02


async def test_dedup_verdicts_through_every_tier(comps: Components) -> None:
    d = comps.dedup
    d.cache_ttl_s = 0  # each call goes through the chain
    ids = list(range(10))
    assert await d.check([fp(i) for i in ids]) == [Seen.NEW] * 10
    links = [f"/item/{i}" for i in ids]
    # The Bloom filter has them (check adds), but no tier does: the exact check lets them
    # through, so a crash between a Bloom add and the enqueue loses nothing.
    stats = await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", links)
    assert stats.queued == 10 and d.stats["bloom_false_positive"] == 10
    again = await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", links)
    assert again.queued == 0 and again.known == 10
    # Queued but not crawled: cold says QUEUED.
    assert await d.check([fp(0)]) == [Seen.QUEUED]
    # Crawled yesterday (cold), crawled a month ago (stale).
    await set_crawled(comps, [fp(1)], datetime.now(UTC) - timedelta(days=1))
    await set_crawled(comps, [fp(2)], datetime.now(UTC) - timedelta(days=30))
    assert await d.check([fp(1), fp(2)]) == [Seen.RECENT, Seen.STALE]
    assert d.stats["cold"] >= 2
    # fp(1) was promoted to hot: the next check is answered there, with a hit counted.
    await d.flush()
    hot = (await comps.hot_urls.get_many([fp(1)]))[0]
    assert hot is not None and hot.hits >= 1
    before = d.stats["hot"]
    assert await d.check([fp(1)]) == [Seen.RECENT]
    assert d.stats["hot"] == before + 1
    # Warm: a url_dedup document in this week's index answers before cold. (Cold is asked
    # too once warm has not answered within the hedge, 1 ms by default — at once for a
    # handful of URLs: on a loaded machine the warm API is often slower than that, and
    # cold, which only knows the URL as queued, would win the race. The hedge is generous
    # here, for one URL too, so warm's answer decides.)
    d.hedge_s, d.ask_both_max = 5.0, 0
    index = comps.runtime.layout.index("url_dedup", datetime.now(UTC))
    await comps.warm.es.index(index=index, id=fp(3), document={
        "url_hash": fp(3), "last_crawled": datetime.now(UTC).isoformat()})
    assert await d.check([fp(3)]) == [Seen.RECENT]
    assert d.stats["warm"] == 1


async def test_a_handful_of_urls_hot_lacks_asks_warm_and_cold_at_once(
        comps: Components) -> None:
    """Up to ``ask_both_max`` URLs that hot does not hold go to warm and cold together
    (one round trip after hot's, not two: a single check's tail); a larger set gives warm
    ``hedge_s`` first, so cold is spared what warm answers in time."""
    d = comps.dedup
    d.cache_ttl_s, d.hedge_s = 0, 5.0   # warm answers within this hedge, always
    links = [f"http://127.0.0.1:9/item/{i}" for i in range(100, 120)]
    assert (await comps.discovery.discover(SOURCE, None, links)).queued == 20
    assert await d.check([fp(100)]) == [Seen.QUEUED]      # cold knows it as queued
    assert d.stats["hedged"] == 1                          # asked at once, no hedge wait
    many = [fp(i) for i in range(101, 101 + d.ask_both_max + 1)]
    assert await d.check(many) == [Seen.QUEUED] * len(many)
    assert d.stats["hedged"] == 1                          # warm first (it answered)
    assert d.stats["cold"] == 1 + len(many)


async def test_dedup_degrades_to_cold_when_warm_is_down(comps: Components) -> None:
    from stratacrawl.warm.client import make_client
    from stratacrawl.warm.store import WarmStore

    comps.dedup.warm = WarmStore(es=make_client("http://127.0.0.1:1", plain_json=True,
                                                request_timeout=1, max_retries=0),
                                 layout=comps.warm.layout)
    comps.dedup.cache_ttl_s = 0
    # Warm first, cold after it failed (or its hedge time): asked both at once, cold may
    # answer before warm's failure is counted, and the count below raced.
    comps.dedup.ask_both_max = 0
    comps.dedup.hedge_s = 10.0
    await comps.discovery.discover(SOURCE, None, ["http://127.0.0.1:9/item/5"])
    await set_crawled(comps, [fp(5)], datetime.now(UTC))
    assert await comps.dedup.check([fp(5)]) == [Seen.RECENT]
    assert comps.dedup.stats["warm_errors"] == 1
    await comps.dedup.warm.close()


async def test_burst_cache_absorbs_identical_checks(comps: Components) -> None:
    d = comps.dedup
    await d.check([fp(1)] * 5)
    t0 = time.monotonic()
    await d.check([fp(1)])
    assert d.stats["cache"] >= 1 and time.monotonic() - t0 < d.cache_ttl_s


async def test_discovery_drops_bad_links_with_reasons(comps: Components) -> None:
    links: list[str | bytes] = [
        "/item/1", "/item/1?utm_source=x", "/list/2", "javascript:void(0)", "mailto:a@b.c",
        "data:text/html,x", "http://127.0.0.1:9/" + "a" * 100_000, b"/item/\xff\xfe",
        "http://10.0.0.1/item/9", "http://other.test/item/1", "/about", "http://[::1",
    ]
    strict = SOURCE.model_copy(update={"allow_private_networks": False,
                                       "allow": []})
    stats = await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", links)
    assert stats.queued == 2  # /item/1 (once: the tracking variant is the same URL) and /list/2
    assert stats.dropped["scheme-javascript"] == 1
    assert stats.dropped["scheme-mailto"] == 1 and stats.dropped["scheme-data"] == 1
    assert stats.dropped["too-long"] == 1 and stats.dropped["not-utf8"] == 1
    assert stats.dropped["out-of-scope"] >= 3
    assert stats.dropped["malformed"] == 1
    private = await comps.discovery.discover(strict, None, ["http://10.0.0.1/item/9",
                                                            "http://127.0.0.1:9/item/7"])
    assert private.dropped["private-network"] == 2 and private.queued == 0
    counts = await comps.ledger.counts()
    kinds = {}
    async with comps.pool.connection() as conn:
        for url, kind in await (await conn.execute("SELECT url, kind FROM tasks")).fetchall():
            kinds[url] = kind
    assert kinds == {"http://127.0.0.1:9/item/1": "item", "http://127.0.0.1:9/list/2": "list"}
    assert counts["s1"] == {"PENDING": 2}


async def test_urgent_submission_jumps_the_queue(comps: Components) -> None:
    await comps.discovery.discover(SOURCE, None, [f"http://127.0.0.1:9/item/{i}"
                                                  for i in range(30)])
    stats = await comps.discovery.submit(SOURCE, ["http://127.0.0.1:9/item/29",
                                                  "http://127.0.0.1:9/special"])
    assert stats.queued == 2
    batch = await comps.frontier.claim("s1", 2, "w")
    assert {t.url for t in batch.tasks} == {"http://127.0.0.1:9/item/29",
                                            "http://127.0.0.1:9/special"}


async def test_a_long_page_is_discovered_in_steps_each_link_queued_once(
        comps: Components, monkeypatch: pytest.MonkeyPatch) -> None:
    from stratacrawl.frontier import discovery

    monkeypatch.setattr(discovery, "CHUNK_LINKS", 4)
    checked: list[int] = []
    check = comps.dedup.check

    async def counting(fps: list[str], crawled: dict[str, float] | None = None):  # type: ignore[no-untyped-def]
        checked.append(len(fps))
        return await check(fps, crawled)

    monkeypatch.setattr(comps.dedup, "check", counting)
    # 11 links, a repeat of item 1 in the second and the third step, two out of scope.
    links = [f"/item/{i}" for i in range(6)] + ["/item/1", "/about", "/item/6", "/item/1",
                                                "/contact"]
    stats = await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", links)
    assert checked == [4, 3, 2]  # three steps; out-of-scope links never reach dedup
    assert stats.links == 11 and stats.dropped["out-of-scope"] == 2
    assert stats.queued == 7 and stats.known == 2
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT url, count(*) FROM tasks WHERE source_id = 's1' GROUP BY url")).fetchall()
    assert {u for u, _ in rows} == {f"http://127.0.0.1:9/item/{i}" for i in range(7)}
    assert all(n == 1 for _, n in rows)


async def test_known_items_fetched_lately_are_fresh_news_on_a_page(comps: Components) -> None:
    """What adaptive re-crawl reads of a list page: item links fetched within ``fresh_s``
    count as news it carries (another page told of them first); older ones and links to
    other list pages do not."""
    comps.dedup.cache_ttl_s = 0
    links = ["/item/1", "/item/2", "/list/2"]
    await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", links)
    now = datetime.now(UTC)
    await set_crawled(comps, [fp(1)], now - timedelta(seconds=5))
    await set_crawled(comps, [fp(2)], now - timedelta(hours=2))
    await set_crawled(comps, [fingerprint("http://127.0.0.1:9/list/2")], now)
    page = await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", links,
                                          fresh_s=60)
    assert (page.queued, page.known, page.fresh) == (0, 3, 1)


async def test_a_list_page_found_behind_queued_items_is_claimed_before_them(
        comps: Components) -> None:
    await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1",
                                   [f"/item/{i}" for i in range(30)])
    # The next list page turns up after thirty items are queued: it leads to more work,
    # so it goes first.
    await comps.discovery.discover(SOURCE, "http://127.0.0.1:9/list/1", ["/list/2"])
    batch = await comps.frontier.claim(SOURCE.id, 2, "w1")
    assert batch.tasks[0].url == "http://127.0.0.1:9/list/2"
    assert batch.tasks[1].kind == "item"
