"""The retry policy of every flow's tasks, in one place.

Transient failures — a connection refused, reset or timed out (PostgreSQL, Redis,
Elasticsearch), a PostgreSQL serialization failure or deadlock, Elasticsearch answering
429/502/503/504, a pool with no free connection — are retried (``TRANSIENT``: 3 retries,
about 5 s apart, jittered). Configuration errors and bad
input (``stratacrawl.errors.Terminal``, an unknown source, a bad parameter) fail at
once with their message: trying again would fail the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import elastic_transport
import httpx
import psycopg
import psycopg_pool
import redis.exceptions

from stratacrawl.errors import Terminal, Transient

_TRANSIENT_TYPES: tuple[type, ...] = (
    Transient, ConnectionError, TimeoutError, asyncio.TimeoutError,
    psycopg.OperationalError, psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected, psycopg_pool.PoolTimeout,
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError,
    elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout,
    httpx.TransportError,
)
_TRANSIENT_HTTP = {429, 502, 503, 504}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_transient(exc: BaseException) -> bool:
    """Whether trying again later may succeed (see the module docstring)."""
    for e in _chain(exc):
        if isinstance(e, Terminal):
            return False
        if isinstance(e, _TRANSIENT_TYPES):
            return True
        status = getattr(getattr(e, "meta", None), "status", None)  # elasticsearch ApiError
        if isinstance(status, int) and status in _TRANSIENT_HTTP:
            return True
    return False


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry a failed task run only for a transient error."""
    exc = state.data if isinstance(state.data, BaseException) else None
    return exc is not None and is_transient(exc)


RETRY_DELAY_S = 5

TRANSIENT: dict[str, Any] = {
    "retries": 3,
    # One delay, not a growing list: the Prefect UI shows a list of delays as "NaNs".
    "retry_delay_seconds": RETRY_DELAY_S,
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_if_transient,
}
