"""One TLS context per process for every HTTP client of the fetch layer: building one
(loading the CA bundle) costs milliseconds, which per robots.txt or per source client
showed up as 13 % of a worker's CPU while 200 sources were being seeded."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()
