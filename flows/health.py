"""health: check and prepare every tier (migrations, index templates); report versions."""

from __future__ import annotations

from prefect import flow

from flows.common import load_settings, publish_table, step
from stratacrawl.wiring import check_elasticsearch, check_postgres, check_redis, open_app


@flow(name="health", log_prints=True)
async def health() -> dict[str, str]:
    """Checks Redis, Elasticsearch and PostgreSQL, applies migrations and index templates."""
    async with open_app(await load_settings()) as comps:
        rt = comps.runtime
        versions = {
            "redis": await step("check Redis", lambda: check_redis(rt)),
            "elasticsearch": await step("check Elasticsearch", lambda: check_elasticsearch(rt)),
            "postgres": await step("check PostgreSQL", lambda: check_postgres(rt)),
        }
    await publish_table("stratacrawl-health", "Tier health",
                        [{"tier": k, "version": v} for k, v in versions.items()])
    return versions


if __name__ == "__main__":
    import asyncio

    print(asyncio.run(health()))
