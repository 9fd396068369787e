"""Open clients for one run and the core objects built on them (async half of the
composition root; :class:`~stratacrawl.runtime.Runtime` is the other half)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

from elasticsearch import AsyncElasticsearch
from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.pool import make_pool
from stratacrawl.cold.url_state import knows_no_url
from stratacrawl.frontier.bloom import BloomFilter, BloomSpec
from stratacrawl.frontier.dedup import Dedup
from stratacrawl.frontier.discovery import Discovery
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.hot_queue import HotQueue
from stratacrawl.frontier.scheduler import Scheduler
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.hot.client import HotRedis, check_kind
from stratacrawl.hot.url_state import HotURLState
from stratacrawl.redact import redact
from stratacrawl.runtime import Runtime


@dataclass
class Components:
    runtime: Runtime
    redis: HotRedis
    es: AsyncElasticsearch
    pool: AsyncConnectionPool
    ledger: Ledger
    hot_queue: HotQueue
    frontier: Frontier
    bloom: BloomFilter
    hot_urls: HotURLState
    dedup: Dedup
    discovery: Discovery
    scheduler: Scheduler
    url_rules: UrlRules


@contextlib.asynccontextmanager
async def open_components(rt: Runtime) -> AsyncIterator[Components]:
    """Everything a flow or CLI command needs, closed on exit."""
    s = rt.settings
    async with (rt.redis_client() as redis, rt.es_client() as es,
                make_pool(rt.database_url, max_size=s.pg_pool_size) as pool):
        await check_kind(redis, redact(rt.endpoints.redis_url))
        ledger = Ledger(pool=pool)
        hot_queue = HotQueue(redis=redis, window=s.hot_window)
        frontier = Frontier(ledger=ledger, hot=hot_queue, lease=timedelta(seconds=s.lease_s))
        bloom = BloomFilter(redis=redis, spec=BloomSpec.for_capacity(
            s.bloom_capacity, s.bloom_fp_rate, shards=s.bloom_shards))
        hot_urls = HotURLState(redis=redis)
        dedup = Dedup(bloom=bloom, hot=hot_urls, pool=pool, es=es, layout=rt.layout,
                      window=timedelta(days=s.dedup_window_days))
        await _bloom_ready_if_nothing_known(bloom, pool)
        url_rules = UrlRules(pool=pool, redis=redis)
        yield Components(rt, redis, es, pool, ledger, hot_queue, frontier, bloom, hot_urls, dedup,
                         Discovery(frontier=frontier, dedup=dedup, rules=url_rules),
                         Scheduler(redis=redis, max_batches=s.fetch_max_batches), url_rules)


async def _bloom_ready_if_nothing_known(bloom: BloomFilter, pool: AsyncConnectionPool) -> None:
    """A missing filter is complete when cold knows no URL yet (first start); otherwise the
    recovery flow rebuilds it and marks it ready, and dedup goes the exact way until then."""
    if await bloom.is_ready() or await bloom.exists():
        return
    if await knows_no_url(pool):
        await bloom.mark_ready()
