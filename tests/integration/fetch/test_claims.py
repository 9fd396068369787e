"""A worker's claims on a chain of list pages (each page's link to the next is the only
task of its source due): each page is claimed as soon as the page before names it, and
no claim in between finds nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from stratacrawl.cold.tasks import Batch
from stratacrawl.crawl import crawl
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.sources import parse_sources
from stratacrawl.wiring import Components
from tests.support.sites import serving

pytestmark = pytest.mark.integration

PAGES = 12


@pytest.fixture
async def chain() -> AsyncIterator[str]:
    """``/list/<n>``: one item and a link to ``/list/<n + 1>`` (the last: none)."""

    async def listing(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        more = f'<a href="/list/{n + 1}">next</a>' if n + 1 < PAGES else ""
        return web.Response(text=f'<html><body><a href="/item/{n}">{n}</a>{more}</body></html>',
                            content_type="text/html")

    async def item(request: web.Request) -> web.Response:
        return web.Response(text="<html><h1>item</h1></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/list/{n}", listing)
    app.router.add_get("/item/{n}", item)
    async with serving(app) as base:
        yield base


async def test_a_chain_of_list_pages_is_claimed_without_empty_claims(
        comps: Components, chain: str, monkeypatch: pytest.MonkeyPatch) -> None:
    claims: list[int] = []
    claim = Frontier.claim

    async def counted(self: Frontier, source_id: str, n: int, owner: str) -> Batch:
        batch = await claim(self, source_id, n, owner)
        claims.append(len(batch.tasks))
        return batch

    monkeypatch.setattr(Frontier, "claim", counted)
    sources = parse_sources({"sources": [{
        "id": "chain", "seeds": [f"{chain}/list/0"], "allow": [f"^{chain}/"],
        "follow": [r"/list/\d+$"], "items": [r"/item/\d+$"], "sitemaps": False,
        "rate": 1000.0, "concurrency": 4, "batch_size": 50, "robots": "ignore",
        "allow_private_networks": True}]})
    report = await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.2)
    assert report.sources["chain"].ok == 2 * PAGES   # every list page and item
    assert sum(claims) == 2 * PAGES
    # Before: every batch that ended was followed by a claim that found nothing (the
    # next page was in the batch after it), one per page. Now a claim that took all
    # that was due leaves the source alone until its list page queues the next one.
    assert claims.count(0) <= 2, claims
