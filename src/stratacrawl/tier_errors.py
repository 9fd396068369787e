"""Which errors mean what, in one place: the retry policy of flows, the staging writer,
lease upkeep and the crawl loop all classify by these.

``TIER_DOWN``: the drivers' errors that mean one of our own tiers did not answer (refused,
reset, timed out, still loading its data after a restart). Not the builtin
``ConnectionError``/``OSError``: a site's connection errors are those, and they are the
page's. A fetch or landing that failed with one of these costs its task no attempt.
``POSTGRES_AWAY`` adds the socket's own ``OSError`` for code that holds a PostgreSQL
connection; ``POSTGRES_BUSY``: PostgreSQL answered but aborted the transaction (deadlock,
serialization), which is simply run again. :func:`is_transient` is the question a retry
asks of any error: may trying again later succeed?"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import elastic_transport
import httpx
import psycopg
import redis.exceptions
from psycopg_pool import PoolTimeout

from stratacrawl.errors import Terminal, Transient

REDIS_DOWN: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError)
POSTGRES_DOWN: tuple[type[BaseException], ...] = (
    psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
ELASTICSEARCH_DOWN: tuple[type[BaseException], ...] = (
    elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)
TIER_DOWN = REDIS_DOWN + POSTGRES_DOWN + ELASTICSEARCH_DOWN
POSTGRES_AWAY: tuple[type[BaseException], ...] = (*POSTGRES_DOWN, OSError)
# Two flushes touching the same URL-state row (a URL fetched again within seconds) can
# deadlock; PostgreSQL aborts one and it is simply run again.
POSTGRES_BUSY: tuple[type[BaseException], ...] = (
    psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
TRANSIENT_TYPES: tuple[type, ...] = (
    Transient, ConnectionError, TimeoutError, asyncio.TimeoutError, *TIER_DOWN,
    *POSTGRES_BUSY, httpx.TransportError)
TRANSIENT_HTTP = frozenset({429, 502, 503, 504})


def tier_of(exc: BaseException) -> str:
    """The tier an error of :data:`TIER_DOWN` came from."""
    if isinstance(exc, REDIS_DOWN):
        return "Redis"
    if isinstance(exc, POSTGRES_DOWN):
        return "PostgreSQL"
    return "Elasticsearch"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_transient(exc: BaseException) -> bool:
    """Whether trying again later may succeed: the first error along the cause chain that
    says (``Terminal`` no; a transient type, or an Elasticsearch answer of 429/5xx, yes)."""
    for e in _chain(exc):
        if isinstance(e, Terminal):
            return False
        if isinstance(e, TRANSIENT_TYPES):
            return True
        status = getattr(getattr(e, "meta", None), "status", None)  # elasticsearch ApiError
        if isinstance(status, int) and status in TRANSIENT_HTTP:
            return True
    return False
