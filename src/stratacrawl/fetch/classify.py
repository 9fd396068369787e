"""What a fetch outcome means for retries: decided once, here.

- level 1 (in the fetcher): connect/read timeouts, resets and 5xx; at most 2 retries;
- never retried: 4xx except 408/429, oversized or wrong-type content, robots-disallowed;
- 429 (and 503 with Retry-After): honour Retry-After and wait for the next round.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum

import aiohttp
import httpx


class Kind(StrEnum):
    OK = "ok"
    NOT_MODIFIED = "not_modified"
    TRANSIENT = "transient"        # retry now (level 1), then the next round
    RATE_LIMITED = "rate_limited"  # wait Retry-After, next round; no level-1 retry
    TERMINAL = "terminal"          # never retried


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    reason: str
    retry_after_s: float | None = None

    @property
    def success(self) -> bool:
        return self.kind in (Kind.OK, Kind.NOT_MODIFIED)

    @property
    def level1_retry(self) -> bool:
        return self.kind is Kind.TRANSIENT


def parse_retry_after(value: str | None, default: float = 60.0) -> float:
    """Seconds to wait; Retry-After is seconds or an HTTP date."""
    if not value:
        return default
    value = value.strip()
    if value.isdigit():
        return float(min(int(value), 86_400))
    from datetime import UTC, datetime
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    return max(0.0, min((when - datetime.now(UTC)).total_seconds(), 86_400.0))


def classify_status(status: int, retry_after: str | None = None) -> Verdict:
    """The verdict of an HTTP status (after redirects)."""
    if 200 <= status < 300:
        return Verdict(Kind.OK, f"http-{status}")
    if status == 304:
        return Verdict(Kind.NOT_MODIFIED, "http-304")
    if status == 429:
        return Verdict(Kind.RATE_LIMITED, "http-429", parse_retry_after(retry_after))
    if status == 503 and retry_after:
        return Verdict(Kind.RATE_LIMITED, "http-503-retry-after", parse_retry_after(retry_after))
    if status == 408 or 500 <= status < 600:
        return Verdict(Kind.TRANSIENT, f"http-{status}")
    return Verdict(Kind.TERMINAL, f"http-{status}")


def _aiohttp_reason(exc: BaseException) -> str | None:
    """The reason named by the aiohttp error behind an httpx one. The httpx-aiohttp
    transport maps every ``ClientConnectionError`` — a server that dropped the connection
    included — to ``httpx.ConnectTimeout``, so a reset would be counted as a timeout."""
    cause = exc.__cause__
    if cause is None or not type(cause).__module__.startswith("aiohttp"):
        return None
    if isinstance(cause, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        return "timeout"
    if isinstance(cause, aiohttp.ClientConnectorError):
        return "connect-error"
    if isinstance(cause, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError
                  | aiohttp.ClientPayloadError):
        return "connection-reset"
    return None


def classify_exception(exc: BaseException) -> Verdict:
    """The verdict of a transport error (timeouts and resets are transient)."""
    if reason := _aiohttp_reason(exc):
        return Verdict(Kind.TRANSIENT, reason)
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return Verdict(Kind.TRANSIENT, "timeout")
    if isinstance(exc, httpx.ConnectError):
        return Verdict(Kind.TRANSIENT, "connect-error")
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | ConnectionError):
        return Verdict(Kind.TRANSIENT, "connection-reset")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return Verdict(Kind.TERMINAL, "bad-url")
    if isinstance(exc, httpx.TransportError):
        return Verdict(Kind.TRANSIENT, "transport-error")
    return Verdict(Kind.TERMINAL, type(exc).__name__)
