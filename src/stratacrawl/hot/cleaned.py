"""The window of each source's pages cleaned last, shared by every cleaner process: a
capped list per source (newest first) that the minute-level integrity check reads. A copy
of what staging and records hold, so losing Redis loses only a minute of checking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis

WINDOW_MAX = 500   # entries kept per source (the largest window a check reads)


async def note(redis: HotRedis, entries: Mapping[str, Sequence[str]]) -> None:
    """Add each source's entries of one landed batch, in one round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for source_id, items in entries.items():
            if items:
                pipe.lpush(keys.cleaned_window(source_id), *items)
                pipe.ltrim(keys.cleaned_window(source_id), 0, WINDOW_MAX - 1)
        await pipe.execute()


async def window(redis: HotRedis, source_id: str, n: int) -> list[str]:
    """The source's ``n`` entries cleaned last, newest first."""
    raw = await redis.lrange(keys.cleaned_window(source_id), 0, n - 1)
    return [r.decode() if isinstance(r, bytes) else r for r in raw]
