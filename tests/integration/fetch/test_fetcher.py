"""The fetcher against a local HTTP server whose responses the test holds open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from stratacrawl.fetch.fetcher import (
    LARGE_BODIES_AT_ONCE,
    LARGE_BODY_BYTES,
    Fetcher,
    SourceClient,
)
from stratacrawl.fetch.robots import RobotsCache
from stratacrawl.sources import parse_sources
from stratacrawl.wiring import Components
from tests.support.sites import serving

pytestmark = pytest.mark.integration


@pytest.fixture
async def held_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """``/big/<n>``: a chunked page (no Content-Length) that sends a bit more than
    ``LARGE_BODY_BYTES``, then the rest once the event is set."""
    release = asyncio.Event()

    async def big(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        await resp.write(b"<html>" + b"x" * LARGE_BODY_BYTES)
        await release.wait()
        await resp.write(b"</html>")
        return resp

    app = web.Application()
    app.router.add_get("/big/{n}", big)
    async with serving(app) as base:
        try:
            yield base, release
        finally:
            release.set()


async def test_large_bodies_are_read_a_few_at_a_time(
        comps: Components, held_server: tuple[str, asyncio.Event]) -> None:
    base, release = held_server
    n = LARGE_BODIES_AT_ONCE * 2
    source = parse_sources({"sources": [{
        "id": "big", "seeds": [f"{base}/big/0"], "allow": [f"^{base}/"], "rate": 1000.0,
        "concurrency": n, "robots": "ignore", "allow_private_networks": True,
        "timeout_s": 30.0}]}).sources[0]
    fetcher = Fetcher(politeness=comps.politeness,
                      robots=RobotsCache(redis=comps.redis))
    client = SourceClient(source)
    try:
        runs = [asyncio.create_task(fetcher.fetch(client, source, f"{base}/big/{i}"))
                for i in range(n)]
        # Every response is past LARGE_BODY_BYTES and held open: only so many are read on.
        for _ in range(200):
            await asyncio.sleep(0.05)
            if fetcher.large_bodies_reading == LARGE_BODIES_AT_ONCE:
                break
        await asyncio.sleep(0.5)  # and no more than that, however long they wait
        assert fetcher.large_bodies_reading == LARGE_BODIES_AT_ONCE
        release.set()
        results = await asyncio.gather(*runs)
    finally:
        await client.aclose()
    assert [r.verdict.success for r in results] == [True] * n
    assert all(len(r.body) == len(b"<html>") + LARGE_BODY_BYTES + len(b"</html>")
               for r in results)
    assert fetcher.large_bodies_reading == 0   # every turn given back


async def test_a_redirect_out_of_scope_is_never_followed(comps: Components) -> None:
    """An in-scope item answering 301, 302 or a protocol-relative redirect to a loopback
    host:port no source allows: nothing reaches that host (its robots.txt neither), the
    fetch ends `redirect-out-of-scope` (terminal, not retried) naming the target; a move
    on the same host is followed as before."""
    hits: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="<html><title>OUT OF SCOPE</title></html>",
                            content_type="text/html")

    other_app = web.Application()
    other_app.router.add_get("/{tail:.*}", elsewhere)
    async with serving(other_app) as other:
        host_port = other.removeprefix("http://")

        async def moved(request: web.Request) -> web.Response:
            targets = {"301": (301, f"{other}/x"), "302": (302, f"{other}/y"),
                       "proto": (301, f"//{host_port}/z"), "same": (301, "/item/new")}
            status, location = targets[request.match_info["how"]]
            return web.Response(status=status, headers={"Location": location})

        async def item(request: web.Request) -> web.Response:
            return web.Response(text="<html><title>moved here</title></html>",
                                content_type="text/html")

        app = web.Application()
        app.router.add_get("/old/{how}", moved)
        app.router.add_get("/item/new", item)
        async with serving(app) as base:
            source = parse_sources({"sources": [{
                "id": "s", "seeds": [f"{base}/old/same"], "allow": [f"^{base}/"],
                "rate": 1000.0, "robots": "obey", "allow_private_networks": True}]}).sources[0]
            fetcher = Fetcher(politeness=comps.politeness, robots=RobotsCache(redis=comps.redis))
            client = SourceClient(source)
            try:
                results = {how: await fetcher.fetch(client, source, f"{base}/old/{how}")
                           for how in ("301", "302", "proto", "same")}
            finally:
                await client.aclose()
    assert hits == []     # not a page, not a robots.txt
    for how, path in (("301", "/x"), ("302", "/y"), ("proto", "/z")):
        r = results[how]
        assert r.verdict.reason == "redirect-out-of-scope" and not r.verdict.level1_retry, r
        assert r.final_url == f"{other}{path}" and r.attempt == 1 and r.body == b""
    assert results["same"].verdict.success and results["same"].final_url == f"{base}/item/new"
