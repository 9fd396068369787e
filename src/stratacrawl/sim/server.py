"""Serving the simulated sources (aiohttp), one application per source on its own address.

Pages are rendered once and kept, already compressed, in a byte-bounded LRU cache:
the steady state of a crawl benchmark is a dict lookup and a socket write, so the
simulator is not the bottleneck. Behaviours (latency, limits, faults) run before
routing; ``/_sim/*`` endpoints (truth, control, stats) bypass them.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from stratacrawl.sim import content, render
from stratacrawl.sim.cache import CachedPage, ResponseCache
from stratacrawl.sim.loopwatch import LoopWatch
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.sim.traps import big_body, gzip_bomb, stream

Clock = Callable[[], datetime]
_ITEM = re.compile(r"^/(article|product|api/prices)/(\d+)(?:;jsessionid=[0-9A-Za-z]+)?(?:/index\.html)?$")
_LIST = re.compile(r"^/(list|catalog)/(\d+)$")
SESSION_COOKIE = "sim_session"
ITEM_PREFIX = {"news": "article", "products": "product", "prices": "api/prices"}
LIST_PREFIX = {"news": "list", "products": "catalog", "prices": None}
HEAVY_BYTES = 256_000  # item pages above this are built and compressed off the event loop


class SourceServer:
    """The state and request handler of one source."""

    def __init__(self, spec: SourceSpec, clock: Clock, cache: ResponseCache,
                 watch: LoopWatch | None = None) -> None:
        self.spec = spec
        self.clock = clock
        self.cache = cache
        self.watch = watch or LoopWatch()
        self.rng = random.Random(f"behaviour:{spec.seed}:{spec.id}")
        self.per_second: dict[int, int] = defaultdict(int)
        self.counts: dict[str, int] = defaultdict(int)
        self.redesign_requests = 0

    # -- behaviours -------------------------------------------------------------------------
    def _rate_limited(self, second: int) -> bool:
        limit = self.spec.behaviour.rate_limit
        return limit is not None and self.per_second[second] > limit

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith("/_sim/"):
            return await self._admin(request)
        b = self.spec.behaviour
        second = int(time.time())
        self.per_second[second] += 1
        if len(self.per_second) > 3700:
            for s in sorted(self.per_second)[:100]:
                del self.per_second[s]
        self.counts["requests"] += 1
        if path.startswith("/private/"):
            self.counts["disallowed_hits"] += 1
        if self._rate_limited(second):
            self.counts["429"] += 1
            return web.Response(status=429, text="slow down", headers={"Retry-After": "1"})
        roll = self.rng.random()
        if roll < b.reset_rate:
            self.counts["resets"] += 1
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        roll -= b.reset_rate
        if roll < b.hang_rate:
            self.counts["hangs"] += 1
            await asyncio.sleep(b.hang_s)
        if b.latency_median_ms > 0:
            delay = self.rng.lognormvariate(0, b.latency_sigma) * b.latency_median_ms / 1000
            if self.rng.random() < b.slow_tail_rate:
                delay *= 10
            await asyncio.sleep(delay)
        if self.rng.random() < b.error_rate:
            status = self.rng.choice((500, 502, 503))
            self.counts["5xx"] += 1
            headers = ({"Retry-After": f"{b.retry_after_503:g}"}
                       if status == 503 and b.retry_after_503 is not None else {})
            return web.Response(status=status, text="upstream error", headers=headers)
        if (b.require_session and path not in ("/", "/robots.txt", "/sitemap.xml")
                and SESSION_COOKIE not in request.cookies):
            # Cookie-check redirect: a client with a cookie jar comes back with it.
            self.counts["no_session"] += 1
            check = web.HTTPFound(location=str(request.rel_url))
            check.set_cookie(SESSION_COOKIE, f"s{self.rng.getrandbits(48):x}", path="/")
            return check
        resp = await self._route(request)
        self.counts[str(resp.status)] += 1
        return resp

    # -- routing ------------------------------------------------------------------------------
    async def _route(self, request: web.Request) -> web.StreamResponse:
        spec, path, now = self.spec, request.path, self.clock()
        count = content.visible_count(spec, now)
        if path == "/":
            resp = await self._cached(request, ("home",), lambda: render.home_html(spec),
                                      "text/html", None)
            if spec.behaviour.require_session and SESSION_COOKIE not in request.cookies:
                resp.set_cookie(SESSION_COOKIE, f"s{self.rng.getrandbits(48):x}", path="/")
            return resp
        if path == "/robots.txt":
            return web.Response(body=render.robots_txt(spec), content_type="text/plain")
        if path == "/sitemap.xml":
            return await self._cached(request, ("sitemap", count),
                                      lambda: render.sitemap_xml(spec, count), "application/xml",
                                      None)
        redesign = spec.behaviour.redesign
        if (m := _ITEM.match(path)) and m.group(1) == ITEM_PREFIX[spec.kind]:
            k = int(m.group(2))
            if k >= count:
                return web.Response(status=404, text="not published")
            modified = content.published_at(spec, k)
            if spec.kind == "prices":
                return await self._cached(request, ("item", k, redesign),
                                          lambda: render.price_json(spec, k), "application/json",
                                          modified)
            heavy = content.get_item(spec, k).size_hint > HEAVY_BYTES
            return await self._cached(request, ("item", k, redesign),
                                      lambda: render.item_html(spec, k, redesign), "text/html",
                                      modified, heavy=heavy)
        m = _LIST.match(path)
        if (m and m.group(1) == LIST_PREFIX[spec.kind]) or (
                path == "/api/prices" and spec.kind == "prices"):
            page = int(m.group(2)) if m else _int(request.query.get("page"), 1)
            newest = content.published_at(spec, count - 1) if count else None
            if page > 1 and count - 1 - (page - 1) * spec.page_size < 0:
                return web.Response(status=404, text="no such page")
            json_api = spec.kind == "prices"
            render_page = render.prices_page_json if json_api else render.list_html
            return await self._cached(request, ("list", page, count),
                                      lambda: render_page(spec, page, count) or b"",
                                      "application/json" if json_api else "text/html", newest)
        if path.startswith("/old/"):
            return web.HTTPMovedPermanently(location="/moved/" + path[len("/old/"):])
        if path.startswith("/moved/"):
            return web.HTTPFound(location="/" + path[len("/moved/"):])
        if path == "/loop/a":
            return web.HTTPFound(location="/loop/b")
        if path == "/loop/b":
            return web.HTTPFound(location="/loop/a")
        if path.startswith("/private/"):
            return web.Response(text="members only", content_type="text/html")
        if path == "/download/feed.html":  # built once, ~1.5 s of CPU: off the loop
            return web.Response(body=await asyncio.to_thread(gzip_bomb), headers={
                "Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"})
        if path == "/download/archive.html":  # 50 MB, no compression: the size cap must hold
            return await stream(request, big_body(), "text/html")
        if path.startswith("/media/"):
            return web.Response(body=b"\xff\xd8\xff\xe0" + bytes(2000), content_type="image/jpeg")
        if path == "/broken/page.html":  # says gzip, is not
            return web.Response(body=b"this is not gzip at all" * 10, headers={
                "Content-Type": "text/html", "Content-Encoding": "gzip"})
        return web.Response(status=404, text="not found")

    async def _cached(self, request: web.Request, key: tuple[Any, ...],
                      make: Callable[[], bytes], ctype: str, modified: datetime | None,
                      heavy: bool = False) -> web.Response:
        """The page from the cache, or made now; ``heavy`` pages (megabytes) are made and
        compressed on a thread, so the loop goes on stamping other sources' arrivals."""
        full_key = (self.spec.id, *key)
        page = self.cache.get(full_key)
        if page is None:
            def build() -> CachedPage:
                return CachedPage(make(), ctype, modified)

            page = await asyncio.to_thread(build) if heavy else build()
            self.cache.put(full_key, page)
        if page.not_modified(request):
            return web.Response(status=304, headers=page.validators)
        accept = request.headers.get("Accept-Encoding", "")
        enc = "br" if "br" in accept else "gzip" if "gzip" in accept else "identity"
        if heavy and enc not in page.variants:
            body, headers = await asyncio.to_thread(page.encoded, enc)
        else:
            body, headers = page.encoded(enc)
        return web.Response(body=body, headers=headers)

    # -- admin --------------------------------------------------------------------------------
    async def _admin(self, request: web.Request) -> web.Response:
        spec = self.spec
        if request.path == "/_sim/truth":
            return web.json_response({"source": spec.id, "kind": spec.kind,
                                      "items": content.truth(spec, self.clock())})
        if request.path == "/_sim/stats":
            return web.json_response(self.stats())
        if request.path == "/_sim/control":
            if request.method == "POST":
                try:
                    values = await request.json()
                    self.control(values)
                except (ValueError, KeyError, TypeError) as e:
                    return web.json_response({"error": f"bad control: {e}"}, status=400)
            return web.json_response({"behaviour": asdict(spec.behaviour),
                                      "stopped_at": spec.stopped_at and spec.stopped_at.isoformat()})
        return web.Response(status=404, text="not found")

    def control(self, values: dict[str, Any]) -> None:
        values = dict(values)
        if "publishing" in values:
            self.spec.stopped_at = None if values.pop("publishing") else self.clock()
        self.spec.behaviour.update(values)

    def stats(self) -> dict[str, Any]:
        limit = self.spec.behaviour.rate_limit
        peak = max(self.per_second.values(), default=0)
        return {"source": self.spec.id, "counts": dict(self.counts), "peak_per_second": peak,
                "seconds_over_limit": sum(1 for v in self.per_second.values()
                                          if limit is not None and v > limit),
                "per_second": {str(k): v for k, v in sorted(self.per_second.items())[-600:]},
                "loop_lag_ms": self.watch.recent_ms(), "gc": self.watch.gc.to_json()}


def _int(text: str | None, default: int) -> int:
    try:
        return max(1, int(text or default))
    except ValueError:
        return default


class Simulator:
    """All sources of one simulated web; ``start`` binds them and fills in the ports."""

    def __init__(self, specs: list[SourceSpec], *, clock: Clock | None = None,
                 cache_bytes: int = 512 * 2**20) -> None:
        self.specs = specs
        self.offset = timedelta(0)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.cache = ResponseCache(cache_bytes)
        self.watch = LoopWatch()
        self.servers = {s.id: SourceServer(s, self.now, self.cache, self.watch) for s in specs}
        self._runners: list[web.AppRunner] = []

    def now(self) -> datetime:
        return self._clock() + self.offset

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward (new items appear, lists change)."""
        self.offset += timedelta(seconds=seconds)

    async def start(self) -> list[SourceSpec]:
        self.watch.start()
        for spec in self.specs:
            app = web.Application(client_max_size=2**20)
            app.router.add_route("*", "/{tail:.*}", self.servers[spec.id].handle)
            runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                   shutdown_timeout=0.5)
            await runner.setup()
            site = web.TCPSite(runner, spec.host, spec.port, backlog=1024, reuse_address=True)
            await site.start()
            if spec.port == 0:
                server = site._server
                assert server is not None
                spec.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
            self._runners.append(runner)
        return self.specs

    async def stop(self) -> None:
        self.watch.stop()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    def truth(self) -> dict[str, list[dict[str, Any]]]:
        now = self.now()
        return {s.id: content.truth(s, now) for s in self.specs}

    def write_truth(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"at": self.now().isoformat(), "sources": self.truth()}, f)


class SimulatorThread:
    """A :class:`Simulator` on its own event loop in a background thread (for tests, demo)."""

    def __init__(self, specs: list[SourceSpec], **kwargs: Any) -> None:
        self.sim = Simulator(specs, **kwargs)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="simulator",
                                        daemon=True)

    def start(self) -> list[SourceSpec]:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self.sim.start(), self.loop).result(30)

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self.sim.stop(), self.loop).result(30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()

    def __enter__(self) -> SimulatorThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
