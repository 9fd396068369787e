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

FIELDS = ("lc", "h", "la", "et", "lm", "ch", "st")


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
        """One pipeline: re-references of ``touched`` (one more hit, accessed now) and
        promotions or updates of ``entries`` (fields as in ``FIELDS``; ``None`` skipped)."""
        if not touched and not entries:
            return
        stamp = f"{now or time.time():.3f}"
        async with self.redis.pipeline(transaction=False) as pipe:
            for fp in touched:
                pipe.hincrby(key(fp), "h", 1)
                pipe.hset(key(fp), "la", stamp)
            for fp, fields in entries.items():
                clean = {k: str(v) for k, v in fields.items() if v is not None}
                if clean:
                    pipe.hset(key(fp), mapping=clean)  # type: ignore[arg-type]
            await pipe.execute()

    async def put_many(self, entries: Mapping[str, Mapping[str, str | int | float | None]]) -> None:
        await self.record([], entries)
