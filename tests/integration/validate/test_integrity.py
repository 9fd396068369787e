"""The minute-level integrity check: a redesign that drops a required field is an alert
naming that field (not the ones still there) and sample pages, raised by the cleaning run
that cleaned the redesigned pages; the fix resolves it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from stratacrawl.cold.alerts import open_alerts
from stratacrawl.cold.tasks import NewTask
from stratacrawl.crawl import crawl
from stratacrawl.sources import SourcesFile, parse_sources
from stratacrawl.urls import canonical_fingerprint
from stratacrawl.validate.integrity import INTEGRITY, IntegrityCheck
from stratacrawl.wiring import Components
from tests.support.sites import serving

pytestmark = pytest.mark.integration
ITEMS = 30


class Shop:
    def __init__(self) -> None:
        self.redesigned = False
        self.base = ""

    async def item(self, request: web.Request) -> web.Response:
        n = request.match_info["n"]
        price = ("<div class=cost>12.50</div>" if self.redesigned
                 else "<span class=p>12.50</span>")
        return web.Response(text=f"<html><body><h1>item {n}</h1>{price}</body></html>",
                            content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", lambda r: web.Response(status=404))
        app.router.add_get("/", lambda r: web.Response(text="".join(
            f'<a href="/item/{n}">{n}</a>' for n in range(ITEMS)), content_type="text/html"))
        app.router.add_get("/item/{n}", self.item)
        return app


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    s = Shop()
    async with serving(s.app()) as base:
        s.base = base
        yield s


def _sources(base: str) -> SourcesFile:
    return parse_sources({"sources": [{
        "id": "shop", "seeds": [f"{base}/"], "items": ["/item/"], "allow_private_networks": True,
        "rate": 50, "sitemaps": False, "required": ["name", "price"],
        "alerts": {"integrity_pages": ITEMS},
        "extract": {"kind": "rules", "fields": {"name": {"css": "h1"},
                                                "price": {"css": ".p", "type": "price"}}}}]})


async def _again(c: Components, sources: SourcesFile, base: str) -> None:
    urls = [f"{base}/item/{n}" for n in range(ITEMS)]
    assert await c.frontier.add([NewTask("shop", u, canonical_fingerprint(u)) for u in urls],
                                on_conflict="requeue") == ITEMS
    await crawl(c, sources, until_idle=True, seconds=60, flush_s=0.3)


async def test_a_redesign_that_drops_a_field_alerts_naming_it_and_the_fix_resolves_it(
        comps: Components, shop: Shop, tmp_path: Any) -> None:
    comps.settings.expectations_dir = tmp_path / "exp"   # no committed suite: the default
    sources = _sources(shop.base)
    heard: list[tuple[str, dict[str, Any]]] = []

    def notify(event: str, payload: dict[str, Any]) -> None:
        heard.append((event, payload))

    await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
    await comps.clean(sources, notify=notify)
    assert heard == [] and await open_alerts(comps.pool, INTEGRITY) == []

    shop.redesigned = True            # 200s, the name still there, the price gone
    await _again(comps, sources, shop.base)
    report = await comps.clean(sources, notify=notify)
    assert report.stats.sources["shop"].format_errors == ITEMS
    (alert,) = await open_alerts(comps.pool, INTEGRITY)
    assert alert.source_id == "shop" and alert.level == "P1"
    assert [f["column"] for f in alert.details["failing"]] == ["price"]
    assert alert.details["failing"][0] == {"check": "completeness", "column": "price",
                                           "share": 1.0}
    assert "price 100% (completeness)" in alert.message and "name" not in alert.message.split(
        "failing:")[1].split("—")[0]
    samples = alert.details["samples"]
    assert len(samples) == 3 and all(u.startswith(f"{shop.base}/item/") for u, _ in samples)
    assert all(t for _, t in samples)    # each names the trace of its fetch
    assert [(e, p["rule"], p["source"]) for e, p in heard] == [
        ("stratacrawl.alert.fired", INTEGRITY, "shop")]

    shop.redesigned = False           # fixed: the next window is whole again
    await _again(comps, sources, shop.base)
    await comps.clean(sources, notify=notify)
    assert await open_alerts(comps.pool, INTEGRITY) == []
    assert heard[-1] == ("stratacrawl.alert.resolved", {"rule": INTEGRITY, "source": "shop"})


async def test_a_window_without_new_pages_is_not_checked_again(
        comps: Components, shop: Shop, tmp_path: Any) -> None:
    comps.settings.expectations_dir = tmp_path / "exp"
    sources = _sources(shop.base)
    await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
    await comps.clean(sources)
    check = IntegrityCheck(pool=comps.pool, redis=comps.redis, settings=comps.settings,
                           sources=sources)
    (first,) = await check.check()
    assert (first.pages, first.failing, first.collapsed) == (ITEMS, [], False)
    assert await check.check() == []          # nothing cleaned since: nothing to look at
