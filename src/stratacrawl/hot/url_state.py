"""Hot URL state in Redis: what the crawler needs about a URL it touches often.

One hash per URL, ``sc:u:<fp>``: ``lc`` last crawled, ``h`` hits, ``la`` last access
(epoch seconds), ``et`` ETag, ``lm`` Last-Modified, ``ch`` content fingerprint,
``st`` HTTP status. The durable copy lives in cold (``url_state``) and warm;
entries here are evicted by the LFU-with-recency score (tier sinking).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from stratacrawl.hot.scripts import script

FIELDS = ("lc", "h", "la", "et", "lm", "ch", "st")


CALL_KEYS = 1000  # URLs per script call: Redis runs one call at a time (~1 ms for 1,000)


def key(fp: str) -> str:
    return f"sc:u:{fp}"


@dataclass
class HotURL:
    last_crawled: float | None
    hits: int
    last_access: float
    etag: str | None = None
    last_modified: str | None = None
    content_hash: str | None = None
    status: int | None = None


def _decode(values: Sequence[bytes | str | None]) -> HotURL | None:
    if all(v is None for v in values):
        return None
    lc, h, la, et, lm, ch, st = (v.decode() if isinstance(v, bytes) else v for v in values)
    return HotURL(float(lc) if lc else None, int(h or 0), float(la or 0), et, lm, ch,
                  int(st) if st else None)


class HotURLState:
    """Read, promote and write hot URL state in pipelines."""

    def __init__(self, *, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._record = script(redis, "url_state")

    async def get_many(self, fps: Sequence[str]) -> list[HotURL | None]:
        if not fps:
            return []
        if len(fps) == 1:  # a pipeline object costs more than the round trip it saves
            return [_decode(await self.redis.hmget(key(fps[0]), FIELDS))]
        async with self.redis.pipeline(transaction=False) as pipe:
            for fp in fps:
                pipe.hmget(key(fp), FIELDS)
            rows = await pipe.execute()
        return [_decode(r) for r in rows]

    async def record(self, touched: Sequence[str],
                     entries: Mapping[str, Mapping[str, str | int | float | None]],
                     now: float | None = None) -> None:
        """Re-references of ``touched`` (one more hit, accessed now) and promotions or
        updates of ``entries`` (fields as in ``FIELDS``; ``None`` skipped): one script call
        per ``CALL_KEYS`` URLs. The keys span hash slots: a single Redis (or a proxy that
        routes by key), not a Redis Cluster."""
        if not touched and not entries:
            return
        stamp = f"{now or time.time():.3f}"
        work = [(fp, None) for fp in touched] + list(entries.items())
        for i in range(0, len(work), CALL_KEYS):
            chunk = work[i:i + CALL_KEYS]
            keys, args = [], [0, stamp]
            for fp, fields in chunk:
                keys.append(key(fp))
                if fields is None:
                    args[0] += 1  # re-references come first in every chunk
                    continue
                flat = [x for kv in fields.items() if kv[1] is not None for x in kv]
                args.append(len(flat) // 2)
                args += flat
            await self._record(keys=keys, args=args)

    async def put_many(self, entries: Mapping[str, Mapping[str, str | int | float | None]]) -> None:
        await self.record([], entries)
