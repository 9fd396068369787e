"""The window of each source's pages cleaned last, shared by every cleaner process: a
capped list per source (newest first) that the minute-level integrity check reads. A copy
of what staging and records hold, so losing Redis loses only a minute of checking."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis

WINDOW_MAX = 500   # entries kept per source (the largest window a check reads)


async def note(redis: HotRedis, entries: Mapping[str, Sequence[str]],
               at: float | None = None) -> None:
    """Add each source's entries of one landed batch (cleaned at ``at``, epoch seconds:
    now), in one round trip."""
    stamp = f"@{time.time() if at is None else at:.3f}"
    async with redis.pipeline(transaction=False) as pipe:
        for source_id, items in entries.items():
            if items:
                pipe.lpush(keys.cleaned_window(source_id), *(i + stamp for i in items))
                pipe.ltrim(keys.cleaned_window(source_id), 0, WINDOW_MAX - 1)
        await pipe.execute()


async def window(redis: HotRedis, source_id: str, n: int = WINDOW_MAX
                 ) -> list[tuple[str, float]]:
    """The source's ``n`` entries cleaned last, newest first: (entry, cleaned at)."""
    raw = await redis.lrange(keys.cleaned_window(source_id), 0, n - 1)
    out = []
    for r in raw:
        entry, _, at = (r.decode() if isinstance(r, bytes) else r).rpartition("@")
        out.append((entry, float(at)))
    return out
