"""A source client's Cookie header, kept per directory, is the one the cookie jar gives:
after the site changes a cookie, for a cookie scoped to a path, and past a cookie's expiry."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from aiohttp import web

from stratacrawl.fetch.fetcher import SourceClient
from stratacrawl.sources import Source
from tests.support.sites import serving

pytestmark = pytest.mark.integration


def _app() -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        response = web.Response(text=request.headers.get("Cookie", "-"))
        if request.path == "/set":
            response.set_cookie("s", request.query["v"], path="/")
        elif request.path == "/scoped":
            response.set_cookie("p", "1", path="/x")          # a path without a final "/"
        elif request.path == "/expiring":
            response.set_cookie("e", "1", path="/", max_age=1)
        return response

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


async def _sent(client: SourceClient, url: str) -> str:
    response = await client.send(url, {})
    try:
        return (await response.aread()).decode()
    finally:
        await response.aclose()


def _jar_says(client: SourceClient, url: str) -> str:
    """What the standard-library jar alone puts in the header (the reference)."""
    reference = httpx.Cookies()
    for cookie in client.cookies.jar:
        reference.jar.set_cookie(cookie)
    request = httpx.Request("GET", url)
    reference.set_cookie_header(request)
    return request.headers.get("cookie", "-")


async def test_the_cookie_header_is_the_jars_through_changes_paths_and_expiry() -> None:
    async with serving(_app()) as base:
        client = SourceClient(Source(id="c", seeds=[base + "/"]))
        try:
            assert await _sent(client, base + "/a/one") == "-"   # no cookie yet
            await _sent(client, base + "/set?v=1")
            for path in ("/a/one", "/a/two", "/b/c", "/"):
                assert await _sent(client, base + path) == "s=1" == _jar_says(client,
                                                                               base + path)
            await _sent(client, base + "/set?v=2")   # the site changes it
            assert await _sent(client, base + "/a/three") == "s=2"

            await _sent(client, base + "/scoped")    # jars with such a cookie: asked each time
            for path in ("/x", "/x/y", "/xy", "/a/one"):
                assert await _sent(client, base + path) == _jar_says(client, base + path)
            assert "p=1" in await _sent(client, base + "/x/y")
            assert "p=1" not in await _sent(client, base + "/xy")

            fresh = SourceClient(Source(id="d", seeds=[base + "/"]))
            try:
                await _sent(fresh, base + "/expiring")
                assert await _sent(fresh, base + "/a/one") == "e=1"
                await asyncio.sleep(1.2)   # past its Max-Age: not sent from the cache
                assert await _sent(fresh, base + "/a/one") == "-"
            finally:
                await fresh.aclose()
        finally:
            await client.aclose()
