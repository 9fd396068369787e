"""The composition root: settings + endpoints → ready core objects.

Nothing else in the core reads the environment or decides where a tier lives.
Async clients are built per event loop by the ``*_client`` methods and closed by
their callers (``async with``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from elasticsearch import AsyncElasticsearch
from redis.exceptions import RedisClusterException

from stratacrawl.cold import db
from stratacrawl.errors import ConfigError, ServiceUnavailable, StratacrawlError
from stratacrawl.hot.client import HotRedis, check_kind, connect
from stratacrawl.redact import redact
from stratacrawl.services import Endpoints
from stratacrawl.settings import Settings
from stratacrawl.warm.client import make_client
from stratacrawl.warm.indices import IndexLayout, ensure_templates, ensure_week_indices

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
        """Environment for a ``stratacrawl`` subprocess on these very tiers."""
        ep = self.endpoints
        return {**os.environ, "STRATACRAWL_REDIS_URL": ep.redis_url,
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

    def es_client(self, **kwargs: Any) -> AsyncElasticsearch:
        return make_client(self.endpoints.elasticsearch_url, plain_json=self.es_plain_json,
                           **kwargs)

    async def prepare(self) -> None:
        """Idempotent start-up: schema migrations, index templates, this week's indices.
        A tier that does not answer is a :class:`ServiceUnavailable` naming it (one line
        for the user, not the driver's traceback); a malformed URL a :class:`ConfigError`."""
        await check_postgres(self)  # before migrating: Alembic's own failure is 150 lines
        await asyncio.to_thread(db.migrate, self.database_url)
        try:
            async with self.es_client() as es:
                await ensure_templates(es, self.layout)
                await ensure_week_indices(es, self.layout)
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
            info = await asyncio.wait_for(r.info("server"), rt.settings.connect_timeout_s)
            await check_kind(r, url)
    except ConfigError as e:
        raise ServiceUnavailable("Redis", url, str(e)) from None
    except (OSError, TimeoutError, aioredis.RedisError, RedisClusterException) as e:
        raise ServiceUnavailable("Redis", url, str(e) or type(e).__name__) from None
    version = str(info.get("redis_version", "?"))
    return f"{version} (cluster)" if rt.settings.redis_cluster else version


async def check_elasticsearch(rt: Runtime) -> str:
    url = redact(rt.endpoints.elasticsearch_url)
    try:
        async with rt.es_client(request_timeout=rt.settings.connect_timeout_s,
                                max_retries=0) as es:
            info = await es.info()
    except Exception as e:  # the client raises many transport types
        raise ServiceUnavailable("Elasticsearch", url, str(e) or type(e).__name__) from None
    version = info.get("version", {})
    return f"{version.get('distribution', 'elasticsearch')} {version.get('number', '?')}"


async def check_postgres(rt: Runtime) -> str:
    return await asyncio.to_thread(db.check, rt.database_url, rt.settings.connect_timeout_s)
