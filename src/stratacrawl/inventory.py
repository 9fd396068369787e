"""What each tier holds right now: the end-of-run summary of the demo and the CLI."""

from __future__ import annotations

from dataclasses import dataclass

from stratacrawl.cold.db import row_counts
from stratacrawl.hot.client import key_count, used_memory_bytes
from stratacrawl.warm.indices import FAMILIES
from stratacrawl.wiring import Runtime

COLD_TABLES = ("tasks", "url_state", "staging", "records", "sessions", "validation_results", "alerts",
               "page_snapshots")


@dataclass
class Inventory:
    redis_keys: int
    redis_used_mb: float
    warm_docs: dict[str, int]
    cold_rows: dict[str, int]

    def lines(self) -> list[str]:
        warm = ", ".join(f"{k}: {v}" for k, v in self.warm_docs.items()) or "no indices"
        cold = ", ".join(f"{k}: {v}" for k, v in self.cold_rows.items())
        return [f"hot  (Redis):         {self.redis_keys} keys, {self.redis_used_mb:.1f} MB used",
                f"warm (Elasticsearch): {warm}",
                f"cold (PostgreSQL):    {cold}"]


async def take_inventory(rt: Runtime) -> Inventory:
    async with rt.redis_client() as r:
        keys = await key_count(r)
        used = await used_memory_bytes(r) / 2**20
    warm: dict[str, int] = {}
    async with rt.warm_store() as store:
        for family in FAMILIES:
            warm[family] = await store.count(family)
    cold = await row_counts(rt.database_url, COLD_TABLES)
    return Inventory(keys, used, warm, cold)
