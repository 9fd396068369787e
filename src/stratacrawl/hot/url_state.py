"""Hot URL state in Redis: what the crawler needs about a URL it touches often.

One hash per URL, ``sc:u:<fp>``: ``lc`` last crawled, ``h`` hits, ``la`` last access
(epoch seconds), ``et`` ETag, ``lm`` Last-Modified, ``ch`` content fingerprint,
``st`` HTTP status. The durable copy lives in cold (``url_state``) and warm;
entries here are evicted by the LFU-with-recency score (tier sinking).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis, as_cluster, is_cluster, scan_keys
from stratacrawl.hot.scripts import script

FIELDS = ("lc", "h", "la", "et", "lm", "ch", "st")


CALL_KEYS = 1000  # URLs per script call: Redis runs one call at a time (~1 ms for 1,000)


Fields = Mapping[str, str | int | float | None]


def key(fp: str) -> str:
    return keys.url_state(fp)


async def fingerprint_batches(redis: HotRedis, batch: int) -> AsyncGenerator[list[str], None]:
    """The fingerprints of every URL state hot holds, ``batch`` at a time, in the order of
    a keyspace scan (a URL added during the scan may be missed; none is seen twice per
    batch)."""
    prefix = len(keys.URL_STATE_PREFIX)
    fps: list[str] = []
    async for k in scan_keys(redis, keys.URL_STATE_PREFIX + "*", max(batch, 1000)):
        fps.append(k[prefix:])
        if len(fps) >= batch:
            yield fps
            fps = []
    if fps:
        yield fps


async def access_of(redis: HotRedis, fps: Sequence[str]) -> list[tuple[int, float | None]]:
    """Per fingerprint: (hits, last access epoch; ``None`` where hot has no access)."""
    async with redis.pipeline(transaction=False) as pipe:
        for fp in fps:
            pipe.hmget(key(fp), "h", "la")
        rows = await pipe.execute()
    return [(int(h or 0), None if la is None else float(la)) for h, la in rows]


async def forget(redis: HotRedis, fps: Sequence[str]) -> None:
    """Drop these URL states from hot (after their durable copy is written)."""
    if fps:
        await redis.delete(*[key(fp) for fp in fps])


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


# A written URL's fields travel as one argument, "field␟value␟field␟value…" (the unit
# separator, which HTTP header values cannot hold, is dropped from values all the same):
# redis-py packs every argument in Python, and a flush's 1,000 URLs as field/value pairs
# were ~11,000 arguments — more client CPU than the flush's PostgreSQL transaction.
_SEP = "\x1f"


def _pack(fields: Fields) -> str:
    return _SEP.join(f"{k}{_SEP}{str(v).replace(_SEP, '')}"
                     for k, v in fields.items() if v is not None)


def _pack_fetched(last_crawled: float, etag: str | None, last_modified: str | None,
                  content_hash: str | None, status: int | None) -> str:
    """``_pack`` of a fetch's fields, without a mapping per URL (a flush writes 1,000)."""
    out = f"lc{_SEP}{last_crawled}"
    if etag is not None:
        out += f"{_SEP}et{_SEP}{etag.replace(_SEP, '')}"
    if last_modified is not None:
        out += f"{_SEP}lm{_SEP}{last_modified.replace(_SEP, '')}"
    if content_hash is not None:
        out += f"{_SEP}ch{_SEP}{content_hash}"
    if status is not None:
        out += f"{_SEP}st{_SEP}{status}"
    return out


# A fetch's hot state: (fingerprint, last crawled in epoch seconds, ETag, Last-Modified,
# content fingerprint, HTTP status).
Fetched = tuple[str, float, str | None, str | None, str | None, int | None]


def _call(chunk: Sequence[tuple[str, Fields | str | None]], stamp: str
          ) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of one ``url_state.lua`` call (re-references, ``None``, first;
    written fields as a mapping, or packed already)."""
    keys: list[str] = []
    args: list[Any] = [0, stamp]
    for fp, fields in chunk:
        keys.append(key(fp))
        if fields is None:
            args[0] += 1
            continue
        args.append(fields if isinstance(fields, str) else _pack(fields))
    return keys, args


class HotURLState:
    """Read, promote and write hot URL state in pipelines."""

    def __init__(self, *, redis: HotRedis) -> None:
        self.redis = redis
        self._record = script(redis, "url_state")
        self._get = script(redis, "url_state_get")
        self._loaded = False

    async def get_many(self, fps: Sequence[str]) -> list[HotURL | None]:
        """The hot state of each URL (None where it has none). On a single Redis one
        script call per ``CALL_KEYS`` URLs: dedup asks for every URL of a batch beside
        the Bloom filter, and pipelined HMGETs cost redis-py ~15k URLs/s of client CPU
        (5x the Bloom check itself). A cluster's keys span slots: pipelined HMGETs."""
        if not fps:
            return []
        if len(fps) == 1:  # a pipeline object costs more than the round trip it saves
            return [_decode(await self.redis.hmget(key(fps[0]), FIELDS))]
        if is_cluster(self.redis):
            async with self.redis.pipeline(transaction=False) as pipe:
                for fp in fps:
                    pipe.hmget(key(fp), FIELDS)
                rows = await pipe.execute()
            return [_decode(r) for r in rows]
        return [_decode(r) for r in await self._read(fps, FIELDS)]

    async def last_crawled_many(self, fps: Sequence[str]) -> list[float | None]:
        """When each URL was last crawled, as hot knows it (None: not known here): what
        dedup asks of every URL of a batch, one field each (the reply of a batch of new
        URLs is then a list of nils, not of 7-field arrays)."""
        if is_cluster(self.redis) or len(fps) < 2:
            return [h.last_crawled if h else None for h in await self.get_many(fps)]
        return [float(v) if v else None for v in await self._read(fps, ("lc",))]

    async def _read(self, fps: Sequence[str], fields: Sequence[str]) -> list[Any]:
        """``url_state_get.lua`` over ``fps``, ``CALL_KEYS`` URLs a call (single Redis):
        per URL its fields' values, or with one field that value."""
        out: list[Any] = []
        for i in range(0, len(fps), CALL_KEYS):
            out += await self._get(keys=[key(fp) for fp in fps[i:i + CALL_KEYS]],
                                   args=list(fields))
        return out

    async def record(self, touched: Sequence[str],
                     entries: Mapping[str, Fields | str], now: float | None = None) -> None:
        """Re-references of ``touched`` (one more hit, accessed now) and promotions or
        updates of ``entries`` (fields as in ``FIELDS``; ``None`` skipped): one script call
        per ``CALL_KEYS`` URLs on a single Redis; on a cluster, where a script may only
        touch keys of one slot, one call per slot, pipelined to every node at once."""
        if not touched and not entries:
            return
        stamp = f"{now or time.time():.3f}"
        work: list[tuple[str, Fields | str | None]] = [(fp, None) for fp in touched]
        work += entries.items()
        if is_cluster(self.redis):
            await self._record_cluster(work, stamp)
            return
        for i in range(0, len(work), CALL_KEYS):
            await self._record(*_call(work[i:i + CALL_KEYS], stamp))

    async def _record_cluster(self, work: list[tuple[str, Fields | str | None]],
                              stamp: str) -> None:
        cluster = as_cluster(self.redis)
        slots: dict[int, list[tuple[str, Fields | str | None]]] = {}
        for item in work:  # re-references stay first within each slot's call
            slots.setdefault(cluster.keyslot(key(item[0])), []).append(item)
        if not self._loaded:  # on every primary, before the first call
            await self.redis.script_load(self._record.script)
            self._loaded = True
        for attempt in (1, 2):
            async with self.redis.pipeline(transaction=False) as pipe:
                for chunk in slots.values():
                    keys, args = _call(chunk, stamp)
                    # (EVALSHA through execute_command: redis-py blocks the pipeline method
                    # name for clusters, but routes the command by its first key)
                    pipe.execute_command("EVALSHA", self._record.sha, len(keys), *keys, *args)
                try:
                    await pipe.execute()
                    return
                except NoScriptError:  # a node restarted or joined since: load, call again
                    # (calls that went through count their re-references twice; hits are
                    # an approximate frequency)
                    if attempt == 2:
                        raise
                    await self.redis.script_load(self._record.script)

    async def put_many(self, entries: Mapping[str, Fields]) -> None:
        await self.record([], entries)

    async def put_fetched(self, fetched: Sequence[Fetched]) -> None:
        """The state of just-fetched URLs (a staging flush's, after its commit)."""
        await self.record([], {f[0]: _pack_fetched(*f[1:]) for f in fetched})
