"""The drivers' errors that mean one of our own tiers did not answer (refused, reset,
timed out, still loading its data after a restart). Not the builtin
``ConnectionError``/``OSError``: a site's connection errors are those, and they are the
page's. A fetch or landing that failed with one of these costs its task no attempt."""

from __future__ import annotations

import elastic_transport
import psycopg
import redis.exceptions
from psycopg_pool import PoolTimeout

REDIS_DOWN: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError, redis.exceptions.TryAgainError)
POSTGRES_DOWN: tuple[type[BaseException], ...] = (
    psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
ELASTICSEARCH_DOWN: tuple[type[BaseException], ...] = (
    elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout)
TIER_DOWN = REDIS_DOWN + POSTGRES_DOWN + ELASTICSEARCH_DOWN


def tier_of(exc: BaseException) -> str:
    """The tier an error of :data:`TIER_DOWN` came from."""
    if isinstance(exc, REDIS_DOWN):
        return "Redis"
    if isinstance(exc, POSTGRES_DOWN):
        return "PostgreSQL"
    return "Elasticsearch"
