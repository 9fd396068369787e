"""Register the connection blocks from the environment (``STRATACRAWL_*``) and the
automations (``deployments/automations.py``).

Run by ``stratacrawl up`` against its local server; against any other Prefect API:
``PREFECT_API_URL=... python -m deployments.bootstrap``. Tiers with no URL in the
environment get no block (flows then use the embedded servers).
"""

from __future__ import annotations

import os

from prefect.client.orchestration import get_client

from blocks.connections import (
    ElasticsearchConnection,
    PostgresConnection,
    RedisConnection,
    SourcesFileBlock,
)
from deployments import automations
from flows.common import WARM_WRITER


def register() -> list[str]:
    env = os.environ
    saved = []
    def flag(var: str) -> bool:
        return env.get(var, "false").lower() in {"1", "true", "yes"}

    plain = flag("STRATACRAWL_ES_PLAIN_JSON")
    pairs = [
        ("stratacrawl-redis", "STRATACRAWL_REDIS_URL",
         lambda u: RedisConnection(url=u, cluster=flag("STRATACRAWL_REDIS_CLUSTER"))),
        ("stratacrawl-elasticsearch", "STRATACRAWL_ELASTICSEARCH_URL",
         lambda u: ElasticsearchConnection(url=u, plain_json=plain,
                                           index_prefix=env.get("STRATACRAWL_ES_INDEX_PREFIX", ""))),
        ("stratacrawl-postgres", "STRATACRAWL_DATABASE_URL", lambda u: PostgresConnection(url=u)),
        ("stratacrawl-sources", "STRATACRAWL_SOURCES", lambda u: SourcesFileBlock(path=u)),
    ]
    for name, var, build in pairs:
        if env.get(var):
            build(env[var]).save(name, overwrite=True)
            saved.append(name)
    return saved


def ensure_limits() -> list[str]:
    """The global concurrency limits the flows take slots of (flows/common.py)."""
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(WARM_WRITER, 1)
    return [f"{WARM_WRITER} (1)"]


if __name__ == "__main__":
    print("registered blocks:", ", ".join(register()) or "none")
    print("global concurrency limits:", ", ".join(ensure_limits()))
    print("automations:", "; ".join(automations.ensure()))
