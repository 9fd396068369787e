"""The parse cache: a cleaned page's extracted records for ``PARSE_CACHE_TTL_S``, keyed by
its source, a digest of the source's extraction rules and a digest of the page's bytes,
so a page fetched again unchanged (or cleaned again) is not extracted again. A cache:
when Redis is away the cleaner extracts every page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stratacrawl.hot import keys as hot_keys
from stratacrawl.hot.client import HotRedis, mget
from stratacrawl.hot.scripts import script

PARSE_CACHE_TTL_S = 1800


class ParseCache:
    def __init__(self, *, redis: HotRedis, ttl_s: int = PARSE_CACHE_TTL_S) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self._put = script(redis, "parse_cache_put")

    @staticmethod
    def key(source_id: str, rules_digest: str, content_digest: str) -> str:
        return hot_keys.parse_cache(source_id, rules_digest, content_digest)

    async def get_many(self, keys: Sequence[str]) -> list[str | bytes | None]:
        return await mget(self.redis, keys) if keys else []

    async def put_many(self, entries: Mapping[str, str | bytes]) -> None:
        """Store ``entries`` (key → serialized records): one script call per source (the
        keys of a source share a hash tag, so this holds on a Redis Cluster too)."""
        by_tag: dict[str, list[str]] = {}
        for key in entries:
            by_tag.setdefault(key[key.index("{"):key.index("}")], []).append(key)
        for group in by_tag.values():
            await self._put(keys=group, args=[*(entries[k] for k in group), self.ttl_s])
