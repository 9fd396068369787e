"""The composition root: settings → endpoints → clients → the application's objects.

The CLI, the flows, the demo, the load test, the benchmarks and the tests all build
through here, and nothing below it reads the environment or decides where a tier lives:

- :class:`Runtime` — settings and resolved endpoints; builds clients and prepares the
  tiers (schema migrations, index templates);
- :class:`Components` — one run's open clients and the stores built on them, each given
  exactly what it uses; the services above the stores (fetch worker, recovery) and the
  use cases every entry point shares (cleaning, validation, sinking) are its methods, so
  the CLI, the flows, the demo and the benchmarks call them and only render;
- :func:`open_app` — configured or embedded servers up, tiers prepared, components open.

Async clients are built per event loop and closed by whoever opened them (``async with``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
from psycopg_pool import AsyncConnectionPool
from redis.exceptions import RedisClusterException

from stratacrawl import build
from stratacrawl.clean.parallel import CleanTarget
from stratacrawl.cold import db
from stratacrawl.cold.ledger import Ledger
from stratacrawl.cold.pool import make_pool, ping
from stratacrawl.cold.runs import Runs
from stratacrawl.cold.url_state import knows_no_url
from stratacrawl.errors import ConfigError, ServiceUnavailable, StratacrawlError
from stratacrawl.fetch.fetcher import Fetcher
from stratacrawl.fetch.hop import ListHop
from stratacrawl.fetch.outage import Outage
from stratacrawl.fetch.politeness import Politeness
from stratacrawl.fetch.result import FetchResult
from stratacrawl.fetch.robots import RobotsCache
from stratacrawl.fetch.sessions import Sessions
from stratacrawl.fetch.worker import FetchWorker
from stratacrawl.frontier.dedup import Dedup
from stratacrawl.frontier.discovery import Discovery, DiscoveryStats
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.recrawl import RecrawlBudget
from stratacrawl.frontier.scheduler import Scheduler
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.hot import client as hot_client
from stratacrawl.hot.bloom import BloomFilter, BloomSpec
from stratacrawl.hot.client import HotRedis, check_kind, connect, server_version
from stratacrawl.hot.live import LiveMetrics
from stratacrawl.hot.pacing import Pacing
from stratacrawl.hot.queue import HotQueue
from stratacrawl.hot.url_state import HotURLState
from stratacrawl.redact import redact
from stratacrawl.services import Endpoints, Services
from stratacrawl.settings import Settings
from stratacrawl.sources import SourcesFile
from stratacrawl.staging.spool import Spool
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.step_runner import StepRunner, run_directly
from stratacrawl.tiers.recovery import Recovery
from stratacrawl.warm import client as warm_client
from stratacrawl.warm.client import make_client
from stratacrawl.warm.indices import IndexLayout
from stratacrawl.warm.store import WarmStore

if TYPE_CHECKING:  # use cases a crawl process never runs: imported where they are used
    from stratacrawl.clean.cleaner import Cleaner  # (trafilatura, lxml)
    from stratacrawl.clean.run import CleanReport
    from stratacrawl.tiers.sinking import SinkReport
    from stratacrawl.validate.integrity import Notify
    from stratacrawl.validate.runner import Validator

log = logging.getLogger(__name__)

REDIS_POOL_WAIT_S = 30.0


@dataclass
class Runtime:
    """What one process needs to talk to the three tiers."""

    settings: Settings
    endpoints: Endpoints
    layout: IndexLayout = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.layout = IndexLayout(prefix=s.es_index_prefix, shards=s.es_shards,
                                  replicas=s.es_replicas, refresh_interval=s.es_refresh_interval,
                                  box_type=s.es_box_type)

    @property
    def database_url(self) -> str:
        return self.endpoints.database_url

    @property
    def es_plain_json(self) -> bool:
        if self.settings.es_plain_json is not None:
            return self.settings.es_plain_json
        return "elasticsearch" in self.endpoints.embedded

    def child_env(self, state_dir: Path | None = None) -> dict[str, str]:
        """Environment for a ``stratacrawl`` subprocess on these very tiers, with these
        settings (a Bloom filter's capacity, say: a child sizing it differently would read
        other bits)."""
        ep = self.endpoints
        return {**os.environ, **self.settings.to_env(), "STRATACRAWL_REDIS_URL": ep.redis_url,
                "STRATACRAWL_REDIS_CLUSTER": "true" if self.settings.redis_cluster else "false",
                "STRATACRAWL_DATABASE_URL": ep.database_url,
                "STRATACRAWL_ELASTICSEARCH_URL": ep.elasticsearch_url,
                "STRATACRAWL_ES_PLAIN_JSON": "true" if self.es_plain_json else "false",
                "STRATACRAWL_ES_INDEX_PREFIX": self.layout.prefix,
                "STRATACRAWL_STATE_DIR": str(state_dir or self.settings.state_dir)}

    def redis_client(self, **kwargs: Any) -> HotRedis:
        s = self.settings
        return connect(self.endpoints.redis_url, cluster=s.redis_cluster,
                       max_connections=(s.redis_cluster_max_connections if s.redis_cluster
                                        else s.redis_max_connections),
                       pool_wait_s=REDIS_POOL_WAIT_S, connect_timeout_s=s.connect_timeout_s,
                       **kwargs)

    def warm_store(self, **kwargs: Any) -> WarmStore:
        """The warm tier's store on a client of its own (closed with the store); ``kwargs``
        go to the client (timeouts, retries)."""
        return WarmStore(es=make_client(self.endpoints.elasticsearch_url,
                                        plain_json=self.es_plain_json, **kwargs),
                         layout=self.layout)

    def check_urls(self) -> None:
        """Each tier's URL well-formed, or a :class:`ConfigError` naming the setting it
        comes from (exit 2): a typo in a URL is bad configuration, not a tier that is down."""
        checks: tuple[tuple[str, str, Callable[[str], object]], ...] = (
            ("STRATACRAWL_REDIS_URL", self.endpoints.redis_url, hot_client.check_url),
            ("STRATACRAWL_ELASTICSEARCH_URL", self.endpoints.elasticsearch_url,
             warm_client.check_url),
            ("STRATACRAWL_DATABASE_URL", self.endpoints.database_url, db.conninfo))
        for setting, url, check in checks:
            try:
                check(url)
            except ConfigError as e:
                raise ConfigError(f"{setting} {redact(url)!r} is malformed: {e}") from None

    async def prepare(self) -> None:
        """Idempotent start-up: schema migrations, index templates, this week's indices.
        A tier that does not answer is a :class:`ServiceUnavailable` naming it (one line
        for the user, not the driver's traceback); a malformed URL a :class:`ConfigError`."""
        self.check_urls()
        await check_postgres(self)  # before migrating: Alembic's own failure is 150 lines
        await check_redis(self)     # the driver's refusal is a 90-line traceback otherwise
        await asyncio.to_thread(db.migrate, self.database_url)
        try:
            async with self.warm_store() as warm:
                await warm.prepare()
        except StratacrawlError:
            raise
        except Exception as e:  # the client raises many transport types
            raise ServiceUnavailable("Elasticsearch", redact(self.endpoints.elasticsearch_url),
                                     str(e).splitlines()[0] if str(e) else type(e).__name__
                                     ) from None
        log.info("tiers ready: PostgreSQL schema migrated (%s); Elasticsearch templates and "
                 "this week's indices in place (%s)", redact(self.database_url),
                 redact(self.endpoints.elasticsearch_url))


async def check_redis(rt: Runtime) -> str:
    url = redact(rt.endpoints.redis_url)
    try:
        async with rt.redis_client() as r:
            version = await asyncio.wait_for(server_version(r), rt.settings.connect_timeout_s)
            await check_kind(r, url)
    except ConfigError as e:
        raise ServiceUnavailable("Redis", url, str(e)) from None
    except (OSError, TimeoutError, aioredis.RedisError, RedisClusterException) as e:
        raise ServiceUnavailable("Redis", url, str(e) or type(e).__name__) from None
    return f"{version} (cluster)" if rt.settings.redis_cluster else version


async def check_elasticsearch(rt: Runtime) -> str:
    url = redact(rt.endpoints.elasticsearch_url)
    try:
        async with rt.warm_store(request_timeout=rt.settings.connect_timeout_s,
                                 max_retries=0) as warm:
            info = await warm.info()
    except Exception as e:  # the client raises many transport types
        raise ServiceUnavailable("Elasticsearch", url, str(e) or type(e).__name__) from None
    version = info.get("version", {})
    return f"{version.get('distribution', 'elasticsearch')} {version.get('number', '?')}"


async def check_postgres(rt: Runtime) -> str:
    return await asyncio.to_thread(db.check, rt.database_url, rt.settings.connect_timeout_s)


@dataclass(kw_only=True)
class Components:
    """One run's open clients and the stores built on them."""

    runtime: Runtime
    redis: HotRedis
    warm: WarmStore
    pool: AsyncConnectionPool
    ledger: Ledger
    runs: Runs                # crawl runs: heartbeats, the dead ones' leases
    spool: Spool              # this host's pages waiting for PostgreSQL
    hot_queue: HotQueue
    frontier: Frontier
    bloom: BloomFilter
    hot_urls: HotURLState
    dedup: Dedup
    discovery: Discovery
    scheduler: Scheduler
    url_rules: UrlRules
    politeness: Politeness    # each source's pace and concurrency slots, cluster-wide
    live: LiveMetrics         # this process's live counters and traces (monitoring)
    robots: RobotsCache
    budget: RecrawlBudget     # each source's re-fetches per day

    @property
    def settings(self) -> Settings:
        return self.runtime.settings

    def upkeep_stores(self) -> contextlib.AbstractAsyncContextManager[tuple[Ledger, Runs]]:
        """The ledger and the runs on a PostgreSQL connection of their own, for the crawl's
        lease upkeep (see :func:`stratacrawl.build.upkeep_stores`)."""
        return build.upkeep_stores(self.runtime.database_url)

    def fetch_worker(self, *, sources: SourcesFile, writer: StagingWriter, worker_id: str,
                     run_id: str | None = None,
                     on_discovered: Callable[[DiscoveryStats], None] | None = None,
                     on_result: Callable[[str, FetchResult], None] | None = None
                     ) -> FetchWorker:
        """A fetch worker over these stores for ``sources``, handing pages to ``writer``;
        its list hop puts list pages' links into the frontier right after their fetch
        (each page's figures to ``on_discovered``); batches, deadlines, drain and
        outage limits and monitoring as the settings say."""
        s = self.settings
        return FetchWorker(
            frontier=self.frontier, scheduler=self.scheduler, url_rules=self.url_rules,
            hot_urls=self.hot_urls, politeness=self.politeness,
            fetcher=Fetcher(politeness=self.politeness, robots=self.robots,
                            deadline_s=s.fetch_deadline_s),
            budget=self.budget,
            sessions=Sessions(redis=self.redis, pool=self.pool, worker=worker_id),
            outage=Outage(limit_s=s.tier_outage_s, probes={
                "Redis": self.redis.ping, "PostgreSQL": lambda: ping(self.pool, wait_s=2)},
                server_probe=lambda: asyncio.to_thread(db.check, self.runtime.database_url, 2)),
            live=self.live if s.monitoring else None,
            sources=sources, writer=writer, worker_id=worker_id, run_id=run_id,
            max_batches=s.fetch_max_batches, hop=ListHop(self.discovery, on_discovered),
            on_result=on_result, drain_s=s.drain_s)

    def clean_target(self, sources: SourcesFile) -> CleanTarget:
        """Where a cleaner process of its own connects (``clean --processes N``)."""
        return CleanTarget(database_url=self.runtime.database_url,
                           redis_url=self.runtime.endpoints.redis_url,
                           redis_cluster=self.settings.redis_cluster, sources_path=sources.path,
                           connect_timeout_s=self.settings.connect_timeout_s)

    def cleaner(self, sources: SourcesFile, *, batch_size: int = 200) -> Cleaner:
        """Staging → records in this process (a cleaning run's own cleaner, ``reclean``, a
        benchmark's bare loop)."""
        return build.cleaner(self.pool, self.redis, sources, batch_size=batch_size)

    async def clean(self, sources: SourcesFile, *, seconds: float | None = None,
                    source_ids: list[str] | None = None, follow: bool = False,
                    processes: int = 1, notify: Notify | None = None) -> CleanReport:
        """One cleaning run (``processes`` > 1: that many cleaners, this one included),
        the minute-level integrity check of what it cleans as it goes (``notify`` hears
        its alerts), and its format-anomaly check: what ``clean`` and the cleaning flow
        run."""
        from stratacrawl.clean.run import clean_staged
        from stratacrawl.validate.integrity import IntegrityCheck

        check = IntegrityCheck(pool=self.pool, redis=self.redis, settings=self.settings,
                               sources=sources)
        done = asyncio.Event()
        watch = asyncio.ensure_future(check.watch(done, notify, source_ids))
        try:
            return await clean_staged(self.cleaner(sources), seconds=seconds,
                                      source_ids=source_ids, follow=follow,
                                      processes=processes, target=self.clean_target(sources),
                                      child=build.clean_in_child)
        finally:
            done.set()
            await watch

    def validator(self, settings: Settings | None = None) -> Validator:
        """Each source-day's GX checkpoint on these tiers (``settings``: other project,
        results or Data Docs folders than this run's)."""
        from stratacrawl.validate.runner import Validator

        return Validator(settings=settings or self.settings,
                         database_url=self.runtime.database_url, pool=self.pool)

    async def sink(self, snapshot_sources: list[str], *, run: StepRunner = run_directly,
                   now: datetime | None = None) -> SinkReport:
        """The nightly sinking with the settings' retentions (each step through ``run``:
        a task run of its own in the flow); ``snapshot_sources`` keep their pages."""
        from stratacrawl.tiers.sinking import sink

        s = self.settings
        return await sink(redis=self.redis, warm=self.warm, pool=self.pool, ledger=self.ledger,
                          warm_retention=timedelta(days=s.warm_retention_days),
                          staging_days=s.staging_retention_days,
                          snapshot_sources=snapshot_sources, now=now, run=run)

    def recovery(self) -> Recovery:
        return Recovery(ledger=self.ledger, frontier=self.frontier, bloom=self.bloom,
                        redis=self.redis, pool=self.pool, warm=self.warm,
                        retention=timedelta(days=self.settings.warm_retention_days),
                        spool=self.spool)


@contextlib.asynccontextmanager
async def open_components(rt: Runtime) -> AsyncIterator[Components]:
    """Clients on ``rt``'s tiers and the stores over them, closed on exit."""
    s = rt.settings
    async with (rt.redis_client() as redis, rt.warm_store() as warm,
                make_pool(rt.database_url, max_size=s.pg_pool_size) as pool):
        await check_kind(redis, redact(rt.endpoints.redis_url))
        ledger = Ledger(pool=pool)
        hot_queue = HotQueue(redis=redis, window=s.hot_window)
        frontier = Frontier(ledger=ledger, hot=hot_queue, lease=timedelta(seconds=s.lease_s),
                            window_budget=s.hot_queue_budget)
        bloom = BloomFilter(redis=redis, spec=BloomSpec.for_capacity(
            s.bloom_capacity, s.bloom_fp_rate, shards=s.bloom_shards))
        hot_urls = HotURLState(redis=redis)
        dedup = Dedup(bloom=bloom, hot=hot_urls, pool=pool, warm=warm,
                      window=timedelta(days=s.dedup_window_days))
        await _bloom_ready_if_nothing_known(bloom, pool)
        url_rules = UrlRules(pool=pool, redis=redis)
        yield Components(
            runtime=rt, redis=redis, warm=warm, pool=pool, ledger=ledger, runs=Runs(pool=pool),
            spool=Spool.of_state(s.state_path), hot_queue=hot_queue,
            frontier=frontier, bloom=bloom, hot_urls=hot_urls, dedup=dedup,
            discovery=Discovery(frontier=frontier, dedup=dedup, rules=url_rules),
            scheduler=Scheduler(redis=redis, max_batches=s.fetch_max_batches),
            url_rules=url_rules, politeness=Politeness(pacing=Pacing(redis=redis)),
            robots=RobotsCache(redis=redis), budget=RecrawlBudget(redis=redis),
            live=LiveMetrics(redis=redis))


async def _bloom_ready_if_nothing_known(bloom: BloomFilter, pool: AsyncConnectionPool) -> None:
    """A missing filter is complete when cold knows no URL yet (first start); otherwise the
    recovery flow rebuilds it and marks it ready, and dedup goes the exact way until then."""
    if await bloom.is_ready() or await bloom.exists():
        return
    if await knows_no_url(pool):
        await bloom.mark_ready()


@contextlib.contextmanager
def runtime_of(settings: Settings, *, keep: bool = False) -> Iterator[Runtime]:
    """The tiers' servers up — configured ones as they are, embedded ones started where
    none runs — and the Runtime on them. On exit the embedded servers this call started
    stop, unless ``keep`` (``stratacrawl up``); ones already running are left running. A
    server that cannot start raises before the block runs."""
    with Services(settings, keep=keep) as endpoints:
        yield Runtime(settings, endpoints)


@contextlib.asynccontextmanager
async def open_app(settings: Settings) -> AsyncIterator[Components]:
    """Configured or embedded tiers up (embedded ones this call started are stopped
    after; ones already running, e.g. under ``stratacrawl up``, are left running),
    schema and indices prepared, components open: the preamble of every CLI command
    and flow run."""
    with runtime_of(settings) as rt:
        await rt.prepare()
        async with open_components(rt) as comps:
            yield comps
