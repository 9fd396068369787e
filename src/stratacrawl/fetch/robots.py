"""robots.txt, obeyed (Crawl-delay too) unless a source says otherwise.

The text is cached in Redis (``sc:robots:<origin>``, 1 h) so all workers share one
fetch, and parsed with Protego once per process. 4xx means no rules; a 5xx or a
timeout means "not now": the source is paused (a failing robots.txt is no
licence to crawl).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from protego import Protego

from stratacrawl.fetch.headers import ROBOTS_AGENT, USER_AGENTS
from stratacrawl.fetch.politeness import SourceHeld
from stratacrawl.fetch.tls import ssl_context
from stratacrawl.hot import caches
from stratacrawl.hot.client import HotRedis
from stratacrawl.tier_errors import TIER_DOWN
from stratacrawl.urls import check_target

NO_ANSWER: tuple[type[BaseException], ...] = (SourceHeld, *TIER_DOWN)

TTL_S = 3600
RETRY_BACKOFF_S = (1.0, 3.0)  # as level-1 retries of a page
UNAVAILABLE = "\x00unavailable"
MAX_ROBOTS_BYTES = 512 * 1024


@dataclass(frozen=True)
class RobotsAnswer:
    allowed: bool
    crawl_delay: float | None
    unavailable: bool = False      # robots.txt answered 5xx / did not answer: pause
    sitemaps: tuple[str, ...] = ()


async def fetch_text(url: str, allow_private: bool = False,
                     backoff_s: tuple[float, ...] = RETRY_BACKOFF_S) -> tuple[int, str]:
    """(status, text) of a small document such as robots.txt (redirects followed, each
    hop through the private-network check: :class:`InvalidURL` if one is refused); a 5xx
    or a transport error is retried like any level-1 failure before it counts."""

    async def guard(request: httpx.Request) -> None:
        check_target(str(request.url), allow_private=allow_private)

    async with httpx.AsyncClient(timeout=10, follow_redirects=True, verify=ssl_context(),
                                 event_hooks={"request": [guard]}) as client:
        for wait in (*backoff_s, None):
            try:
                r = await client.get(url, headers={"User-Agent": USER_AGENTS[0]})
                if r.status_code < 500 or wait is None:
                    return r.status_code, r.text
            except httpx.TransportError:
                if wait is None:
                    raise
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")


def origin(url: str) -> str:
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


class RobotsCache:
    """``check(url)`` → allowed?, crawl delay; fetching robots.txt through ``get_text``."""

    def __init__(self, *, redis: HotRedis,
                 get_text: Callable[[str, bool], Awaitable[tuple[int, str]]] = fetch_text,
                 ) -> None:
        self.redis = redis
        self.get_text = get_text
        self._parsed: dict[str, tuple[float, Protego | None, bool]] = {}
        # One load of an origin at a time in this process: a crawl's sitemap reading and
        # its first fetch of the same site ask at once, and robots.txt is fetched once.
        self._loading: dict[str, asyncio.Lock] = {}

    def _fresh(self, org: str) -> tuple[Protego | None, bool] | None:
        hit = self._parsed.get(org)
        return (hit[1], hit[2]) if hit and hit[0] > time.monotonic() else None

    async def _load(self, org: str, before_fetch: Callable[[], Awaitable[object]] | None,
                    allow_private: bool) -> tuple[Protego | None, bool]:
        if (hit := self._fresh(org)) is not None:
            return hit
        lock = self._loading.setdefault(org, asyncio.Lock())
        async with lock:   # another caller may have loaded it meanwhile
            if (hit := self._fresh(org)) is not None:
                return hit
            return await self._read(org, before_fetch, allow_private)

    async def _read(self, org: str, before_fetch: Callable[[], Awaitable[object]] | None,
                    allow_private: bool) -> tuple[Protego | None, bool]:
        now = time.monotonic()
        body = await caches.robots_text(self.redis, org)
        if body is None:
            try:
                if before_fetch is not None:  # robots.txt is a request like any other: paced
                    await before_fetch()
                status, text = await self.get_text(org + "/robots.txt", allow_private)
            except NO_ANSWER:  # the site said wait (Retry-After), or our Redis did not
                raise          # answer: neither is an answer on robots.txt
            except Exception:  # no answer, or a redirect onto a private network (InvalidURL)
                status, text = 599, ""
            if 200 <= status < 300:
                body = text[:MAX_ROBOTS_BYTES]
                ttl = TTL_S
            elif 400 <= status < 500:
                body, ttl = "", TTL_S            # no robots.txt: no rules
            else:
                body, ttl = UNAVAILABLE, 300     # try again in 5 minutes
            await caches.save_robots_text(self.redis, org, body, ttl)
        unavailable = body == UNAVAILABLE
        parser = None if unavailable or not body else Protego.parse(body)
        self._parsed[org] = (now + 60, parser, unavailable)
        return parser, unavailable

    async def check(self, url: str,
                    before_fetch: Callable[[], Awaitable[object]] | None = None, *,
                    allow_private: bool = False) -> RobotsAnswer:
        """May ``url`` be fetched? ``before_fetch`` runs before robots.txt itself is fetched
        (the caller's politeness turn for that source). robots.txt goes through the same
        private-network check as every fetch (``allow_private``: the source's setting):
        a private host's robots.txt is never fetched for a source that does not allow it."""
        check_target(url, allow_private=allow_private)
        parser, unavailable = await self._load(origin(url), before_fetch, allow_private)
        if unavailable:
            return RobotsAnswer(False, None, unavailable=True)
        if parser is None:
            return RobotsAnswer(True, None)
        return RobotsAnswer(parser.can_fetch(url, ROBOTS_AGENT), parser.crawl_delay(ROBOTS_AGENT),
                            sitemaps=tuple(parser.sitemaps))
