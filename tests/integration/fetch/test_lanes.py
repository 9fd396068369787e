"""A batch's lanes: on a site that answers slowly, every concurrency slot of the source is
busy (never more), and each lane gives its slot back when it has nothing left."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from stratacrawl.cold.staging import StagedFetch
from stratacrawl.crawl import crawl
from stratacrawl.fetch.politeness import SLOT_TTL_S, Politeness
from stratacrawl.hot import keys as hot_keys
from stratacrawl.sources import SourcesFile, parse_sources
from stratacrawl.wiring import Components
from tests.support.sites import serving

pytestmark = pytest.mark.integration

ITEMS = 24
CONCURRENCY = 4


@dataclass
class SlowSite:
    base: str = ""
    in_flight: int = 0
    most: int = 0
    served: list[str] = field(default_factory=list)


@pytest.fixture
async def slow_site() -> AsyncIterator[SlowSite]:
    """``/list``: links to ``ITEMS`` items; each ``/item/<n>`` answers after 0.1-0.3 s
    (as its number says: lanes end at different times)."""
    site = SlowSite()

    async def listing(request: web.Request) -> web.Response:
        links = "".join(f'<a href="/item/{i}">{i}</a>' for i in range(ITEMS))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def item(request: web.Request) -> web.Response:
        site.in_flight += 1
        site.most = max(site.most, site.in_flight)
        try:
            await asyncio.sleep(0.1 + int(request.match_info["n"]) % 3 * 0.1)
        finally:
            site.in_flight -= 1
        site.served.append(request.path)
        return web.Response(text=f"<html><h1>{request.match_info['n']}</h1></html>",
                            content_type="text/html")

    app = web.Application()
    app.router.add_get("/list", listing)
    app.router.add_get("/item/{n}", item)
    async with serving(app) as site.base:
        yield site


def _slow_source(base: str, batch_size: int) -> SourcesFile:
    return parse_sources({"sources": [{
        "id": "slow", "seeds": [f"{base}/list"], "allow": [f"^{base}/"],
        "follow": [r"/list$"], "items": [r"/item/\d+$"], "rate": 1000.0,
        "concurrency": CONCURRENCY, "batch_size": batch_size, "robots": "ignore",
        "allow_private_networks": True}]})


async def test_a_slow_source_has_every_slot_busy_and_never_more(
        comps: Components, slow_site: SlowSite) -> None:
    sources = _slow_source(slow_site.base, batch_size=100)
    gc.collect()
    gc.disable()   # what the crawl leaves to the cyclic collector stays: none of its pages
    try:
        report = await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.2)
        left = [o for o in gc.get_objects() if isinstance(o, StagedFetch)]
    finally:
        gc.enable()
    assert left == []
    assert sorted(slow_site.served) == sorted(f"/item/{i}" for i in range(ITEMS))
    assert report.sources["slow"].ok == ITEMS + 1
    # One request per slot, every slot used: the batch of 24 items ran in 4 lanes.
    assert slow_site.most == CONCURRENCY
    # Every lane gave its slot back.
    assert await comps.redis.zcard(hot_keys.slots("slow")) == 0


async def test_a_batch_asks_for_slots_only_when_the_source_may_have_one_free(
        comps: Components, slow_site: SlowSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of one source side by side: a batch whose source this process fills alone
    never asks Redis for more slots (on a slow site that was a script call a fetch)."""
    asked: list[tuple[int, int]] = []   # (slots asked for, slots got)
    renew = Politeness.renew_slots

    async def counted(self: Politeness, source_id: str, holders: list[str], limit: int,
                      ttl_s: float = SLOT_TTL_S) -> int:
        got = await renew(self, source_id, holders, limit, ttl_s)
        asked.append((len(holders), got))
        return got

    monkeypatch.setattr(Politeness, "renew_slots", counted)
    sources = _slow_source(slow_site.base, batch_size=6)
    await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.2)
    assert sorted(slow_site.served) == sorted(f"/item/{i}" for i in range(ITEMS))
    assert slow_site.most == CONCURRENCY
    assert asked, "no slot was asked for"
    assert [a for a in asked if a[1] == 0] == []


async def test_a_slot_no_lane_uses_goes_to_the_sources_next_batch(
        comps: Components, slow_site: SlowSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lane done with its batch keeps its slot a moment: the next batch of the source
    takes it without a script call (and without the release before it); at the end
    every slot is back in Redis."""
    taken: list[int] = []
    renew = Politeness.renew_slots

    async def counted(self: Politeness, source_id: str, holders: list[str], limit: int,
                      ttl_s: float = SLOT_TTL_S) -> int:
        got = await renew(self, source_id, holders, limit, ttl_s)
        taken.append(got)
        return got

    monkeypatch.setattr(Politeness, "renew_slots", counted)
    sources = _slow_source(slow_site.base, batch_size=2)   # 12 batches of 2 items
    await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.2)
    assert sorted(slow_site.served) == sorted(f"/item/{i}" for i in range(ITEMS))
    assert slow_site.most <= CONCURRENCY
    # the 13 batches (the list page's and 12 of items) ran in 4 slots taken a few times
    # over, not one slot a batch plus its lanes' (28 and more on the code before)
    assert sum(taken) <= 2 * CONCURRENCY + 2, taken
    assert await comps.redis.zcard(hot_keys.slots("slow")) == 0


@pytest.mark.slow
async def test_a_list_page_found_while_every_slot_is_busy_waits_about_one_batch(
        comps: Components) -> None:
    """A list page found while a slow source's slots are all busy with a pile of known
    items is fetched after about one batch of them, not behind all of them: a batch is
    sized to ~2 s of its source's answers, a slot a lane gives up goes first to a running
    batch of the source with tasks waiting, and no claim of the source is made while one
    of its batches has not started its lanes."""
    answered: dict[str, float] = {}
    asked: dict[str, float] = {}
    pages = 4

    async def page(request: web.Request) -> web.Response:
        asked.setdefault(request.path, time.monotonic())
        # every page: 0.1-0.5 s (lanes end at different times), 0.3 s on average
        await asyncio.sleep(0.1 + sum(map(ord, request.path)) % 5 * 0.1)
        n = int(request.path.rsplit("/", 1)[1]) if request.path.startswith("/list/") else 0
        links = [f"/list/{n + 1}"] if n < pages else []
        if request.path == "/":   # the start: many items known at once, as a sitemap gives
            links += [f"/item/{i}" for i in range(240)]
        links += [f"/item/{n}-{i}" for i in range(4)] if n else []
        answered.setdefault(request.path, time.monotonic())
        body = "".join(f'<a href="{href}">x</a>' for href in links)
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    async with serving(app) as base:
        sources = parse_sources({"sources": [{
            "id": "slow", "seeds": [f"{base}/"], "allow": [f"^{base}/"],
            "follow": [r"/list/\d+$"], "items": [r"/item/"], "rate": 1000.0,
            "concurrency": CONCURRENCY, "batch_size": 100, "robots": "ignore",
            "allow_private_networks": True}]})
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.2)
    waits = {n: asked[f"/list/{n}"] - answered["/" if n == 1 else f"/list/{n - 1}"]
             for n in range(1, pages + 1)}
    assert len([p for p in asked if p.startswith("/item/")]) == 240 + 4 * pages
    # A batch here is ~7 tasks a lane (2 s of 0.3 s answers), 28 in all: on 4 lanes it
    # is done in ~2.1 s — the longest a list page may wait behind it, with some slack.
    assert max(waits.values()) < 3.0, waits
