"""What the alert evaluator remembers between its runs, in hot: each source's recent
ledger backlog (a sorted set of ``<epoch>:<backlog>`` samples, for the "growing steadily"
rule) and since when each alert condition has held (a hash, ``<rule>|<source>`` -> epoch),
so a condition fires only once it has held long enough.
"""

from __future__ import annotations

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis


async def backlog_samples(redis: HotRedis, source_id: str, backlog: int, now: float,
                          window_s: float) -> list[tuple[float, int]]:
    """Add the source's backlog at ``now``, forget samples older than ``window_s``, and
    return those kept: (epoch, backlog), oldest first."""
    key = keys.backlog(source_id)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(key, {f"{now:.3f}:{backlog}": now})
        pipe.zremrangebyscore(key, 0, now - window_s)
        pipe.expire(key, int(window_s * 2))
        pipe.zrange(key, 0, -1)
        *_, raw = await pipe.execute()
    out = []
    for item in raw:
        at, n = (item.decode() if isinstance(item, bytes) else str(item)).split(":")
        out.append((float(at), int(n)))
    return out


def _field(rule: str, source_id: str) -> str:
    return f"{rule}|{source_id}"


async def held_since(redis: HotRedis, rule: str, source_id: str, now: float) -> float:
    """Since when the condition has held: ``now`` if it starts holding now."""
    field = _field(rule, source_id)
    await redis.hsetnx(keys.ALERTS_PENDING, field, f"{now:.3f}")
    return float(await redis.hget(keys.ALERTS_PENDING, field) or now)


async def cleared(redis: HotRedis, rule: str, source_id: str) -> None:
    """The condition does not hold (any more)."""
    await redis.hdel(keys.ALERTS_PENDING, _field(rule, source_id))
