"""The demo: embedded tiers + site simulator, every flow's core once, then an inventory."""

from __future__ import annotations

import time
from collections.abc import Callable

from stratacrawl.inventory import take_inventory
from stratacrawl.runtime import Runtime
from stratacrawl.services import Services
from stratacrawl.settings import Settings


async def run_demo(settings: Settings, *, n_sources: int, seed: int,
                   out: Callable[[str], object] = print) -> str:
    t0 = time.monotonic()
    with Services(settings) as endpoints:
        rt = Runtime(settings, endpoints)
        out(f"tiers: redis {endpoints.redis_url} · elasticsearch {endpoints.elasticsearch_url} "
            f"· postgres {endpoints.database_url}")
        await rt.prepare()
        out("schema migrated, index templates and this week's indices in place")
        inv = await take_inventory(rt)
    return "\n".join([*inv.lines(), f"demo finished in {time.monotonic() - t0:.1f} s"])
