"""Each source's re-fetches asked for per UTC day, one counter per source and day shared
by every worker (the re-crawl's daily budget is checked against it)."""

from __future__ import annotations

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis

BUDGET_TTL_S = 2 * 86_400   # a day's counter outlives the day (clocks differ a little)


async def add_recrawl_asks(redis: HotRedis, source_id: str, day: str, wanted: int) -> int:
    """Count ``wanted`` more re-fetches asked for on ``day`` (``YYYY-MM-DD``); returns the
    day's total including them."""
    key = keys.recrawl_budget(source_id, day)
    total = int(await redis.incrby(key, wanted))
    if total == wanted:   # the day's first ask made the counter
        await redis.expire(key, BUDGET_TTL_S)
    return total
