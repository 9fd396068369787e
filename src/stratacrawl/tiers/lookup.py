"""One URL's facts through the tiers: hot, then warm (``url_meta``), then cold.

The answer is the same whichever tier holds the URL (transparency): sinking moves a URL
from warm to cold without changing what a lookup says; only ``tier`` tells where it was.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.url_state import url_facts
from stratacrawl.hot.url_state import HotURLState
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.warm.store import WarmStore

log = logging.getLogger(__name__)


@dataclass
class URLFacts:
    url_hash: str
    canonical_url: str
    source_id: str | None
    url: str | None
    last_crawled: str | None     # ISO 8601, UTC
    http_status: int | None
    content_hash: str | None
    etag: str | None
    last_modified: str | None
    tier: str                    # where the facts came from: warm or cold
    in_hot: bool = False         # also held in hot (recently referenced)

    def same_facts(self) -> dict[str, Any]:
        """Everything but where it was found."""
        d = asdict(self)
        d.pop("tier")
        d.pop("in_hot")
        return d


def _ts(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).isoformat().replace(
        "+00:00", "Z")


async def lookup(url: str, *, hot: HotURLState, warm: WarmStore | None,
                 pool: AsyncConnectionPool) -> URLFacts | None:
    canonical = canonicalize(url)
    fp = canonical_fingerprint(canonical)
    (hot_entry,) = await hot.get_many([fp])
    facts = await _warm(fp, canonical, warm) if warm is not None else None
    if facts is None:
        facts = await _cold(fp, canonical, pool)
    if facts is not None:
        facts.in_hot = hot_entry is not None
    return facts


async def _warm(fp: str, canonical: str, warm: WarmStore) -> URLFacts | None:
    try:
        found = await warm.newest(fp)
    except Exception as e:  # warm down or no index yet: cold answers
        log.debug("lookup: warm unavailable: %s", e)
        return None
    if found is None:
        return None
    src, status = found
    return URLFacts(fp, canonical, src.get("source_id"), src.get("url"),
                    _ts(src.get("crawled_at")), status, src.get("content_hash"), src.get("etag"),
                    src.get("last_modified"), "warm")


async def _cold(fp: str, canonical: str, pool: AsyncConnectionPool) -> URLFacts | None:
    row = await url_facts(pool, fp)
    if row is None:
        return None
    source_id, url, last_crawled, status, content_hash, etag, lm = row
    return URLFacts(fp, canonical, source_id, url, _ts(last_crawled), status,
                    content_hash, etag, lm, "cold")
