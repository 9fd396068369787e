"""Fetch one URL: politeness, robots, redirects, size cap, classification, level-1 retries.

httpx is the API; the transport is aiohttp's (``httpx-aiohttp``) with its decompression
off, so raw bytes stream in and are decoded here under the size cap. Redirects are
followed by hand: every hop is a new request under the rules a link obeys — the
source's ``allow`` scope, the private-network rule, the target's robots.txt, the source's
pace — counted, and a loop is detected by canonical URL. A hop out of scope is never
requested: the fetch ends ``redirect-out-of-scope`` (terminal, no retry) with the target
as its final URL.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urljoin

import aiohttp
import brotli
import httpx
from httpx_aiohttp import AiohttpTransport

from stratacrawl.errors import InvalidURL
from stratacrawl.fetch.classify import Kind, Verdict, classify_exception, classify_status, parse_retry_after
from stratacrawl.fetch.cookies import CookieHeaders
from stratacrawl.fetch.decode import BoundedDecoder, TooLarge
from stratacrawl.fetch.headers import browser_headers
from stratacrawl.fetch.politeness import Politeness, SourceHeld
from stratacrawl.fetch.result import FetchResult
from stratacrawl.fetch.robots import RobotsCache
from stratacrawl.fetch.tls import ssl_context
from stratacrawl.sources import Source
from stratacrawl.tier_errors import TIER_DOWN
from stratacrawl.urls import canonicalize, check_target

log = logging.getLogger(__name__)
REDIRECTS = {301, 302, 303, 307, 308}
MAX_REDIRECTS = 5
REDIRECT_OUT_OF_SCOPE = "redirect-out-of-scope"
# Bodies past LARGE_BODY_BYTES (raw or decoded) are read LARGE_BODIES_AT_ONCE at a time per
# process: a body costs twice its size while read (the chunks, then the joined body), so
# what large pages can cost at once is bounded (4 x 2 x 5 MB), whatever the concurrency.
LARGE_BODY_BYTES = 1 << 20
LARGE_BODIES_AT_ONCE = 4
LEVEL1_BACKOFF_S = (1.0, 3.0)
DEADLINE_S = 60.0  # a fetch's whole time, retries included (``STRATACRAWL_FETCH_DEADLINE_S``)
CONTENT_TYPES = ("text/html", "application/xhtml+xml", "application/json", "application/xml",
                 "text/xml", "text/plain", "application/rss+xml", "application/atom+xml",
                 "application/ld+json")


class SourceClient:
    """One source's HTTP session: its own connection pool (never larger than the source's
    concurrency) and cookie jar.

    Requests and responses are httpx's; they go straight to the aiohttp transport. httpx's
    client layer would add nothing we use (redirects and auth are ours) but costs a cookie
    round trip through ``http.cookiejar`` on every response, so cookies are sent and
    taken here only when there are some (the Cookie header from ``CookieHeaders``).
    """

    def __init__(self, source: Source, cookies: httpx.Cookies | None = None) -> None:
        n = source.concurrency
        self._cookie_headers = CookieHeaders(cookies)
        self.cookies = self._cookie_headers.cookies
        self.timeout = httpx.Timeout(connect=min(10.0, source.timeout_s), read=source.timeout_s,
                                     write=10.0, pool=source.timeout_s).as_dict()

        def session() -> aiohttp.ClientSession:
            connector = aiohttp.TCPConnector(limit=n, keepalive_timeout=5.0, ssl=ssl_context())
            return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

        # ``verify``: the transport builds a TLS context of its own otherwise (the CA bundle
        # loaded again, ~0.1 s of CPU per source client), though aiohttp uses ours.
        self.transport = AiohttpTransport(client=session, verify=ssl_context())

    async def send(self, url: str, headers: dict[str, str]) -> httpx.Response:
        """GET ``url``; the body is left to stream (``aiter_raw``); close the response."""
        request = httpx.Request("GET", url, headers=headers, extensions={"timeout": self.timeout})
        self._cookie_headers.add_to(request)
        response = await self.transport.handle_async_request(request)
        if "set-cookie" in response.headers:
            self.cookies.extract_cookies(response)
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()


class Fetcher:
    """Fetches under politeness and robots. A fetch has a total deadline (``deadline_s``,
    or its source's ``deadline_s``) over all its attempts, redirects and body reads: a
    server that trickles its answer a byte a second is cut off there (``timeout-total``)
    instead of holding its batch for the read timeout of every byte. An error of one of
    our own tiers (Redis for the pace and robots.txt) is not classified: it propagates,
    and the worker gives the task back without spending an attempt."""

    def __init__(self, *, politeness: Politeness, robots: RobotsCache,
                 rng: random.Random | None = None,
                 backoff_s: tuple[float, ...] = LEVEL1_BACKOFF_S,
                 deadline_s: float = DEADLINE_S) -> None:
        self.politeness = politeness
        self.robots = robots
        self.rng = rng or random.Random()
        self.backoff_s = backoff_s
        self.deadline_s = deadline_s
        self._large_bodies = asyncio.Semaphore(LARGE_BODIES_AT_ONCE)
        self.large_bodies_reading = 0  # past LARGE_BODY_BYTES now (<= LARGE_BODIES_AT_ONCE)

    async def fetch(self, client: SourceClient, source: Source, url: str,
                    validators: dict[str, str] | None = None,
                    trace_id: str | None = None) -> FetchResult:
        """Fetch with at most ``len(backoff_s)`` level-1 retries (transient errors only),
        all within the fetch's deadline."""
        trace_id = trace_id or uuid.uuid4().hex
        deadline = source.deadline_s or self.deadline_s
        started, fetched_at = time.monotonic(), datetime.now(UTC)
        retried: list[str] = []
        try:
            async with asyncio.timeout(deadline):
                return await self._attempts(client, source, url, validators, trace_id, retried)
        except TimeoutError:
            return FetchResult(url=url, verdict=Verdict(Kind.TRANSIENT, "timeout-total"),
                               fetched_at=fetched_at, trace_id=trace_id,
                               elapsed_ms=(time.monotonic() - started) * 1000, retried=retried)

    async def _attempts(self, client: SourceClient, source: Source, url: str,
                        validators: dict[str, str] | None, trace_id: str,
                        retried: list[str]) -> FetchResult:
        result = None
        for attempt in range(1, len(self.backoff_s) + 2):
            result = await self._once(client, source, url, validators or {}, trace_id, attempt)
            if result.verdict.kind is Kind.RATE_LIMITED and result.status in (429, 503):
                await self._slow_down(source, result)
            if not result.verdict.level1_retry or attempt > len(self.backoff_s):
                result.retried = retried  # a fault that a retry hid still counts
                return result
            retried.append(result.verdict.reason)
            base = self.backoff_s[attempt - 1]
            await asyncio.sleep(base * self.rng.uniform(0.8, 1.2))
        assert result is not None
        return result

    async def _slow_down(self, source: Source, result: FetchResult) -> None:
        """A 429 (or 503 with Retry-After): the source's effective rate goes down for every
        worker, and its Retry-After (when the site sent one) holds the whole source."""
        header = result.headers.get("retry-after")
        hold = parse_retry_after(header) if header else None
        try:
            factor = await self.politeness.throttle(source.id, source.rate, source.concurrency,
                                                    hold)
        except Exception as e:  # Redis away: the pace still holds the configured rate
            log.warning("fetch: cannot throttle %s: %r", source.id, e)
            return
        log.info("fetch: %s answered %s; effective rate %.2f/s%s", source.id, result.status,
                 source.rate * factor, f", held {hold:.0f} s" if hold else "",
                 extra={"source_id": source.id, "status": result.status})

    async def _once(self, client: SourceClient, source: Source, url: str,
                    validators: dict[str, str], trace_id: str, attempt: int) -> FetchResult:
        started = time.monotonic()
        fetched_at = datetime.now(UTC)

        def done(verdict: Verdict, **kw: Any) -> FetchResult:
            return FetchResult(url=url, verdict=verdict, fetched_at=fetched_at, trace_id=trace_id,
                               attempt=attempt, elapsed_ms=(time.monotonic() - started) * 1000,
                               **kw)

        current, seen, hops = url, set[tuple[str, frozenset[tuple[str, str]]]](), list[str]()
        try:
            async with asyncio.timeout(source.timeout_s * 2):
                for _ in range(MAX_REDIRECTS + 1):
                    # Every hop, the first too: a task may come from a path that never
                    # went through discovery (a sitemap named in robots.txt, a submission,
                    # a ledger written by an older version), and redirects go anywhere.
                    try:
                        key = canonicalize(current) if hops else current
                        check_target(key, allow_private=source.allow_private_networks)
                    except InvalidURL as e:
                        return done(Verdict(Kind.TERMINAL, e.reason), redirects=hops)
                    if hops and source.allow and not source.matches("allow", key):
                        return done(Verdict(Kind.TERMINAL, REDIRECT_OUT_OF_SCOPE),
                                    redirects=hops, final_url=current)
                    # A revisit is a loop only with the same cookies: a cookie-check redirect
                    # to the same URL (Set-Cookie, then back) is how sites start sessions.
                    state = (key, frozenset(client.cookies.items()))
                    if state in seen:
                        return done(Verdict(Kind.TERMINAL, "redirect-loop"), redirects=hops)
                    seen.add(state)
                    delay = None
                    if source.robots == "obey":
                        answer = await self.robots.check(current, lambda: self.politeness.wait_turn(
                            source.id, source.rate),
                            allow_private=source.allow_private_networks)
                        if answer.unavailable:
                            return done(Verdict(Kind.RATE_LIMITED, "robots-unavailable", 300.0))
                        if not answer.allowed:
                            return done(Verdict(Kind.TERMINAL, "robots-disallowed"),
                                        redirects=hops)
                        delay = answer.crawl_delay
                    await self.politeness.wait_turn(source.id, source.rate, delay)
                    headers = browser_headers(self.rng)
                    if current == url:
                        if et := validators.get("etag"):
                            headers["If-None-Match"] = et
                        if lm := validators.get("last_modified"):
                            headers["If-Modified-Since"] = lm
                    response = await client.send(current, headers)
                    try:
                        status = response.status_code
                        location = response.headers.get("location")
                        if status in REDIRECTS and location:
                            hops.append(current)
                            current = urljoin(current, location)
                            continue
                        verdict, fields = await self._read(response, source, current, status,
                                                           hops)
                        return done(verdict, **fields)
                    finally:
                        await response.aclose()
                return done(Verdict(Kind.TERMINAL, "too-many-redirects"), redirects=hops)
        except SourceHeld as held:  # Retry-After: nobody sends to this source until then
            return done(Verdict(Kind.RATE_LIMITED, "source-held", held.seconds), redirects=hops)
        except TIER_DOWN:  # our Redis, not the site: the worker gives the task back
            raise
        except Exception as exc:  # transport errors, timeouts
            return done(classify_exception(exc), redirects=hops)

    async def _read(self, response: httpx.Response, source: Source, final_url: str,
                    status: int, hops: list[str]) -> tuple[Verdict, dict[str, Any]]:
        """The verdict and result fields of a final (non-redirect) response."""
        headers = {k.lower(): v for k, v in response.headers.items()}
        verdict = classify_status(status, headers.get("retry-after"))
        ctype = headers.get("content-type", "")
        fields: dict[str, Any] = {"final_url": final_url, "status": status, "headers": headers,
                                  "content_type": ctype or None, "redirects": hops}
        if not verdict.success or status == 304:
            return verdict, fields
        if ctype and not ctype.split(";")[0].strip().lower().startswith(CONTENT_TYPES):
            return Verdict(Kind.TERMINAL, "content-type"), fields
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > source.max_bytes:
            return Verdict(Kind.TERMINAL, "too-large"), fields
        try:
            decoder = BoundedDecoder(headers.get("content-encoding"), source.max_bytes)
        except ValueError:
            return Verdict(Kind.TERMINAL, "content-encoding"), fields
        parts: list[bytes] = []
        raw_size = size = 0
        large = False  # holding one of the large-body turns (set only once acquired)
        if declared.isdigit() and int(declared) > LARGE_BODY_BYTES:
            await self._large_bodies.acquire()
            large = True
            self.large_bodies_reading += 1
        try:
            async for chunk in response.aiter_raw():
                raw_size += len(chunk)
                if raw_size > source.max_bytes:
                    raise TooLarge(source.max_bytes)
                parts.append(part := decoder.feed(chunk))
                size += len(part)
                if not large and max(raw_size, size) > LARGE_BODY_BYTES:
                    await self._large_bodies.acquire()  # no or a false Content-Length
                    large = True
                    self.large_bodies_reading += 1
            parts.append(decoder.flush())
            fields["body"] = b"".join(parts)
        except TooLarge:
            return Verdict(Kind.TERMINAL, "too-large"), fields
        except (zlib.error, brotli.error):
            return Verdict(Kind.TERMINAL, "bad-encoding"), fields
        finally:
            if large:
                self._large_bodies.release()
                self.large_bodies_reading -= 1
        return verdict, fields
