"""One record per item: a re-crawl with changed content, a moved URL that redirects to the
item after its content changed, and a variant URL fetched before a URL rule named it all
leave exactly one record, updated in place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web

from stratacrawl.cold.tasks import NewTask
from stratacrawl.crawl import crawl
from stratacrawl.sources import SourcesFile, parse_sources
from stratacrawl.urls import canonical_fingerprint
from stratacrawl.wiring import Components
from tests.support.sites import serving

pytestmark = pytest.mark.integration


class Site:
    """Items whose content changes when told; ``/old/item/N`` is a moved URL:
    301 → ``/moved/item/N`` → 302 → ``/item/N``."""

    def __init__(self) -> None:
        self.version = 1
        self.base = ""

    async def item(self, request: web.Request) -> web.Response:
        n = request.match_info["n"]
        return web.Response(text=f"<html><body><h1>item {n}</h1><p class=v>{self.version}</p>"
                                 "</body></html>", content_type="text/html")

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", lambda r: web.Response(status=404))
        app.router.add_get("/", lambda r: web.Response(text="".join(
            f'<a href="{u}">{u}</a>' for u in ("/item/1", "/item/2", "/item/3?ref=list")),
            content_type="text/html"))
        app.router.add_get("/item/{n}", self.item)
        app.router.add_get("/old/item/{n}", lambda r: web.HTTPMovedPermanently(
            f"/moved/item/{r.match_info['n']}"))
        app.router.add_get("/moved/item/{n}", lambda r: web.HTTPFound(
            f"/item/{r.match_info['n']}"))
        return app


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    s = Site()
    async with serving(s.app()) as base:
        s.base = base
        yield s


def _sources(base: str, pin: list[str]) -> SourcesFile:
    return parse_sources({"sources": [{
        "id": "s", "seeds": [f"{base}/"], "items": ["/item/"], "allow_private_networks": True,
        "rate": 50, "sitemaps": False, "url_rules": {"learn": False, "pin": pin},
        "extract": {"kind": "rules", "fields": {"name": {"css": "h1"},
                                                "v": {"css": "p.v", "type": "int"}}}}]})


async def _records(c: Components) -> dict[str, dict[str, Any]]:
    async with c.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT canonical_url, url, version, fields, day, created_at, crawled_at "
            "FROM records ORDER BY canonical_url")
        rows = await cur.fetchall()
        items = await (await conn.execute(
            "SELECT count(*) FROM record_items")).fetchone()
    assert items == (len(rows),)
    out: dict[str, dict[str, Any]] = {}
    for canonical, url, version, fields, day, created, crawled in rows:
        assert canonical.rsplit("/", 2)[-2:][0] == "item"
        key = canonical.split("/item/")[1]
        assert key not in out, f"{canonical}: two records"
        out[key] = {"url": url, "version": version, "fields": fields, "day": day,
                    "created_at": created, "crawled_at": crawled}
    return out


async def _refetch(c: Components, sources: SourcesFile, urls: list[str]) -> None:
    assert await c.frontier.add([NewTask("s", u, canonical_fingerprint(u)) for u in urls],
                                on_conflict="requeue") == len(urls)
    await crawl(c, sources, until_idle=True, seconds=30, flush_s=0.3)


async def test_a_refetch_a_moved_url_and_a_variant_update_the_one_record(
        comps: Components, site: Site) -> None:
    before = _sources(site.base, [])
    await crawl(comps, before, until_idle=True, seconds=30, flush_s=0.3)
    first = await comps.cleaner(before).run()
    assert first.inserted == 3
    old = await _records(comps)
    assert set(old) == {"1", "2", "3?ref=list"}
    assert {r["fields"]["v"] for r in old.values()} == {1}

    # The content changes; then item 1 is crawled again, item 2 is reached through its
    # moved URL (two redirects), and item 3 by its plain URL once a rule says `ref` is
    # noise — the variant fetched before the rule becomes the plain URL's item.
    site.version = 2
    after = _sources(site.base, ["drop-param:ref"])
    await _refetch(comps, after, [f"{site.base}/item/1", f"{site.base}/old/item/2",
                                  f"{site.base}/item/3"])
    cleaner = comps.cleaner(after)
    second = await cleaner.run()
    assert (second.pages, second.inserted, second.updated) == (3, 0, 3)
    new = await _records(comps)
    assert set(new) == {"1", "2", "3"}
    for key, was in (("1", old["1"]), ("2", old["2"]), ("3", old["3?ref=list"])):
        rec = new[key]
        assert rec["fields"] == {"name": f"item {key}", "v": 2}, rec
        assert rec["version"] == 2, (key, rec)
        assert (rec["day"], rec["created_at"]) == (was["day"], was["created_at"])  # first seen
        assert rec["crawled_at"] > was["crawled_at"]
    assert new["2"]["url"] == f"{site.base}/item/2"     # where the redirects ended

    # Cleaning the same pages again changes nothing; an older page re-cleaned after the
    # newer one leaves the newer record as it is.
    assert await cleaner.reclean("s", datetime.now().date()) == 6
    again = await cleaner.run()
    assert again.pages == 6 and again.inserted == 0
    assert await _records(comps) == new
