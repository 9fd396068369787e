"""The Cookie header of a source's requests, from its jar, without asking the jar on every
request.

httpx keeps cookies in a standard-library ``CookieJar``, whose ``add_cookie_header`` costs
~27 us a request on this kind of machine (a urllib request built around ours, then every
cookie's policy checks): ~3 % of a quiet site's CPU per page once the site has set a
cookie. What the jar answers depends on the request's scheme, host and path and on the
clock only through expiry; for cookies whose paths end in "/" and that are not limited
to ports, the path matters only up to its last "/". So the header is kept per (scheme,
host, directory) until the jar changes or its first cookie expires; a jar holding any
other cookie is asked every time, as before.
"""

from __future__ import annotations

import http.cookiejar
import math
import time

import httpx

MAX_ENTRIES = 256   # directories kept (a site's URL space can have many)
_MISSING = object()


class CountingJar(http.cookiejar.CookieJar):
    """A cookie jar that counts its changes (every set, every removal)."""

    def __init__(self, policy: http.cookiejar.CookiePolicy | None = None) -> None:
        super().__init__(policy)
        self.changes = 0

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        super().set_cookie(cookie)
        self.changes += 1

    def clear(self, domain: str | None = None, path: str | None = None,
              name: str | None = None) -> None:
        super().clear(domain, path, name)
        self.changes += 1


class CookieHeaders:
    """A source's cookies (``cookies``, httpx's, over a :class:`CountingJar`) and the
    Cookie header they give each request."""

    def __init__(self, cookies: httpx.Cookies | None = None) -> None:
        self._jar = CountingJar()
        for cookie in cookies.jar if cookies is not None else ():
            self._jar.set_cookie(cookie)
        self.cookies = httpx.Cookies(self._jar)
        self._seen = -1              # the jar's change count the cache was built at
        self._any = False
        self._cacheable = False
        self._until = math.inf       # the first expiry of a cookie in the jar
        self._headers: dict[tuple[str, str, int | None, bytes], object] = {}

    def _refresh(self) -> None:
        cookies = list(self._jar)
        self._seen = self._jar.changes
        self._headers.clear()
        self._any = bool(cookies)
        self._cacheable = all(c.path.endswith("/") and not c.port_specified for c in cookies)
        expiries = [c.expires for c in cookies if c.expires is not None]
        self._until = min(expiries) if expiries else math.inf

    def add_to(self, request: httpx.Request) -> None:
        """Set ``request``'s Cookie header as the jar would (none if no cookie applies)."""
        if self._seen != self._jar.changes or time.time() >= self._until:
            self._refresh()
        if not self._any:
            return
        if not self._cacheable:
            self.cookies.set_cookie_header(request)
            return
        url = request.url
        path = url.raw_path.split(b"?", 1)[0]
        key = (url.scheme, url.host, url.port, path[:path.rfind(b"/") + 1])
        header = self._headers.get(key, _MISSING)
        if header is _MISSING:
            self.cookies.set_cookie_header(request)
            if len(self._headers) >= MAX_ENTRIES:
                self._headers.clear()
            # (asking the jar may have dropped an expired cookie: a change, seen next time)
            self._headers[key] = request.headers.get("cookie")
        elif header is not None:
            request.headers["Cookie"] = str(header)
