"""Demotion: committed fetches' URL state and page metadata go to warm, in bulk.

Cold's ``url_state.warm_synced_at`` is the watermark: a row whose ``last_crawled`` is newer
than it has not reached warm yet. The crawl demotes as it goes; when Elasticsearch is
down the watermark simply stays behind and the sinking or recovery flow backfills later —
the crawl never waits for warm. Documents go to the weekly index of their crawl time,
``_id`` = URL hash, so re-demoting the same state is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk
from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.url_state import demotion_lock, mark_synced, unsynced
from stratacrawl.warm.indices import IndexLayout

log = logging.getLogger(__name__)


@dataclass
class DemoteStats:
    docs: int = 0
    rows: int = 0
    error: str | None = None
    busy: bool = False   # another process was demoting: this one left it to it


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def warm_docs(layout: IndexLayout, row: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The two warm documents of one ``url_state`` row (dedup facts and page metadata)."""
    (url_hash, source_id, url, etag, last_modified, content_hash, status, title, length,
     last_crawled, retry_count, last_access) = row
    when = last_crawled
    return [
        {"_index": layout.index("url_dedup", when), "_id": url_hash, "_source": {
            "url_hash": url_hash, "domain": urlsplit(url).hostname or "", "source_id": source_id,
            "last_crawled": _iso(last_crawled), "last_access": _iso(last_access),
            "retry_count": min(retry_count, 32767),
            "http_status": str(status) if status is not None else None}},
        {"_index": layout.index("url_meta", when), "_id": url_hash, "_source": {
            "url_hash": url_hash, "url": url, "source_id": source_id, "title": title,
            "crawled_at": _iso(last_crawled), "last_access": _iso(last_access),
            "content_hash": content_hash, "content_length": length, "etag": etag,
            "last_modified": last_modified}},
    ]


async def demote(pool: AsyncConnectionPool, es: AsyncElasticsearch, layout: IndexLayout,
                 *, limit: int = 5000, max_rounds: int | None = None) -> DemoteStats:
    """Index unsynced URL state in warm until none is left (or ``max_rounds`` batches);
    an Elasticsearch failure stops the run and leaves the watermark where it was.

    One process demotes at a time (a PostgreSQL advisory lock): every crawl worker runs
    this every few seconds, and without the lock each indexed the same rows again."""
    async with demotion_lock(pool) as got:
        if not got:
            return DemoteStats(busy=True)
        return await _demote(pool, es, layout, limit, max_rounds)


async def _demote(pool: AsyncConnectionPool, es: AsyncElasticsearch, layout: IndexLayout,
                  limit: int, max_rounds: int | None) -> DemoteStats:
    stats = DemoteStats()
    rounds = 0
    while max_rounds is None or rounds < max_rounds:
        rounds += 1
        rows = await unsynced(pool, limit)
        if not rows:
            break
        actions = [doc for row in rows for doc in warm_docs(layout, row)]
        try:
            ok, errors = await async_bulk(es, actions, chunk_size=2000, raise_on_error=False,
                                          stats_only=False)
        except Exception as e:  # warm is down: backfill later from the watermark
            stats.error = f"{type(e).__name__}: {e}"
            log.warning("demotion: warm tier unavailable, will backfill: %s", e)
            break
        errs: list[dict[str, Any]] = errors if isinstance(errors, list) else []
        failed = {err[next(iter(err))].get("_id") for err in errs}
        synced = [(r[0], r[9]) for r in rows if r[0] not in failed]
        await mark_synced(pool, synced)
        stats.docs += ok
        stats.rows += len(synced)
        if failed:
            stats.error = f"{len(failed)} document(s) refused by Elasticsearch"
            break
        if len(rows) < limit:
            break
    return stats
