"""Register the connection blocks from the environment (``STRATACRAWL_*``) and the
automations (``deployments/automations.py``).

Run by ``stratacrawl up`` against its local server; against any other Prefect API:
``PREFECT_API_URL=... python -m deployments.bootstrap``, and after ``prefect deploy``
``python -m deployments.bootstrap deployment-limits`` (the deployments' limits named, the
fetch deployment's set from the host's cores). Tiers with no URL in the
environment get no block (flows then use the embedded servers).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate

from blocks.connections import (
    ElasticsearchConnection,
    PostgresConnection,
    RedisConnection,
    SourcesFileBlock,
)
from deployments import automations
from flows.common import WARM_WRITER
from stratacrawl.settings import Settings


def register() -> list[str]:
    """A block for every tier (and the sources file) the environment's settings name."""
    s = Settings()
    blocks: list[tuple[str, str | None, Any]] = [
        ("stratacrawl-redis", s.redis_url,
         lambda u: RedisConnection(url=u, cluster=s.redis_cluster)),
        ("stratacrawl-elasticsearch", s.elasticsearch_url,
         lambda u: ElasticsearchConnection(url=u, plain_json=bool(s.es_plain_json),
                                           index_prefix=s.es_index_prefix)),
        ("stratacrawl-postgres", s.database_url, lambda u: PostgresConnection(url=u)),
        ("stratacrawl-sources", str(s.sources) if "sources" in s.model_fields_set else None,
         lambda u: SourcesFileBlock(path=u)),
    ]
    saved = []
    for name, value, build in blocks:
        if value:
            build(value).save(name, overwrite=True)
            saved.append(name)
    return saved


def fetch_runs() -> int:
    """How many fetch runs may run at once: ``STRATACRAWL_FETCH_RUNS``, else one per core
    of this host (a fetch run keeps about one core busy; a run ending while the next
    minute's starts overlaps it for a few seconds, which a limit of one would cancel)."""
    return Settings().fetch_runs or max(1, os.cpu_count() or 1)


def name_deployment_limits() -> list[str]:
    """Give the limits Prefect made for the deployments' ``concurrency_limit`` names a
    person can read (Prefect names them ``deployment:<uuid>``; runs are held to a limit by
    its id, so the name is free), and the fetch deployment's the host's limit
    (:func:`fetch_runs`). Run after ``prefect deploy``, which sets the limits of
    ``prefect.yaml`` again."""
    done = []
    with get_client(sync_client=True) as client:
        for d in client.read_deployments():
            gcl = d.global_concurrency_limit
            if gcl is None:
                continue
            name = f"stratacrawl-{d.name}-runs"
            limit = fetch_runs() if d.name == "fetch" else gcl.limit
            client.update_global_concurrency_limit(
                gcl.name, GlobalConcurrencyLimitUpdate(name=name, limit=limit))
            done.append(f"{name} ({limit})")
    return done


def ensure_limits() -> list[str]:
    """The global concurrency limits the flows take slots of (flows/common.py)."""
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(WARM_WRITER, 1)
    return [f"{WARM_WRITER} (1)"]


if __name__ == "__main__":
    if sys.argv[1:] == ["deployment-limits"]:   # after `prefect deploy`
        print("deployment limits:", ", ".join(name_deployment_limits()) or "none")
        print("automations of deployments:", "; ".join(automations.ensure_deployed()))
        sys.exit(0)
    print("registered blocks:", ", ".join(register()) or "none")
    print("global concurrency limits:", ", ".join(ensure_limits()))
    print("automations:", "; ".join(automations.ensure()))
