"""The warm tier's store: two documents per crawled URL, in weekly indices of its crawl
time — ``url_dedup`` (the facts dedup needs: last crawl, status, retries, last access) and
``url_meta`` (page metadata: validators, content fingerprint, length) — ``_id`` = URL
hash, so indexing the same state again is idempotent.

:class:`WarmStore` is the tier's one object: every Elasticsearch call Stratacrawl makes is
one of its named operations (dedup's look-up, ``lookup``'s newest documents, recovery's
count per week, demotion's bulk index, sinking's stale pages and empty weeks, the index
templates and weekly indices). The composition root builds it around a client; the tiers,
the frontier and the reports take the store and never the client, so another warm
backend is another class with these operations.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from elasticsearch import AsyncElasticsearch
from elasticsearch.helpers import async_bulk

from stratacrawl.warm.indices import FAMILIES, IndexLayout, ensure_templates, ensure_week_indices, week_suffix


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


class WarmStore:
    """The warm tier over one Elasticsearch client (``es``) and its index names
    (``layout``). An async context manager: leaving it closes the client."""

    def __init__(self, *, es: AsyncElasticsearch, layout: IndexLayout) -> None:
        self.es = es
        self.layout = layout

    async def __aenter__(self) -> WarmStore:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        await self.es.close()

    async def info(self) -> dict[str, Any]:
        """The server's own description (name, version): the health check's answer."""
        return dict(await self.es.info())

    # -- indices -------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Index templates and this week's (and next week's) indices; idempotent."""
        await ensure_templates(self.es, self.layout)
        await ensure_week_indices(self.es, self.layout)

    async def create_weeks_ahead(self, weeks_ahead: int, now: datetime) -> list[str]:
        """This week's and the next ``weeks_ahead`` weeks' indices; the names created."""
        return await ensure_week_indices(self.es, self.layout, weeks_ahead, now)

    async def drop_empty_weeks(self, now: datetime) -> list[str]:
        """Weekly indices before this week that hold no document, deleted; their names."""
        current = week_suffix(now)
        dropped = []
        for family in FAMILIES:
            rows = await self.es.cat.indices(index=f"{self.layout.alias(family)}-*",
                                             format="json")
            for row in rows.body if isinstance(rows.body, list) else []:
                name = row["index"]
                suffix = name.rsplit("-", 1)[-1]
                if (suffix.isdigit() and suffix < current
                        and int(row.get("docs.count") or 0) == 0):
                    await self.es.indices.delete(index=name)
                    dropped.append(name)
        return dropped

    # -- documents -----------------------------------------------------------------------

    def docs(self, row: tuple[Any, ...]) -> list[dict[str, Any]]:
        """The two warm documents (index actions) of one ``url_state`` row: dedup facts and
        page metadata."""
        (url_hash, source_id, url, etag, last_modified, content_hash, status, length,
         last_crawled, retry_count, last_access) = row
        when = last_crawled
        return [
            {"_index": self.layout.index("url_dedup", when), "_id": url_hash, "_source": {
                "url_hash": url_hash, "domain": urlsplit(url).hostname or "",
                "source_id": source_id,
                "last_crawled": _iso(last_crawled), "last_access": _iso(last_access),
                "retry_count": min(retry_count, 32767),
                "http_status": str(status) if status is not None else None}},
            {"_index": self.layout.index("url_meta", when), "_id": url_hash, "_source": {
                "url_hash": url_hash, "url": url, "source_id": source_id,
                "crawled_at": _iso(last_crawled), "last_access": _iso(last_access),
                "content_hash": content_hash, "content_length": length, "etag": etag,
                "last_modified": last_modified}},
        ]

    async def index(self, actions: Sequence[dict[str, Any]], chunk: int = 2000
                    ) -> tuple[int, set[str]]:
        """Bulk-index (or update, delete) ``actions``; returns (succeeded, ids refused)."""
        ok, errors = await async_bulk(self.es, actions, chunk_size=chunk, raise_on_error=False,
                                      stats_only=False)
        errs: list[dict[str, Any]] = errors if isinstance(errors, list) else []
        return ok, {err[next(iter(err))].get("_id") for err in errs}

    async def last_crawled(self, fps: Sequence[str], days: int) -> dict[str, float]:
        """Newest last crawl (epoch seconds) of each URL in the ``url_dedup`` weeks of the
        last ``days``: one ``mget`` of every (week, URL) pair."""
        indices = self.layout.window("url_dedup", days)
        docs = [{"_index": idx, "_id": fp} for fp in fps for idx in indices]
        resp = await self.es.mget(docs=docs, source_includes=["last_crawled"])
        out: dict[str, float] = {}
        for doc in resp["docs"]:
            if doc.get("found"):
                raw = doc["_source"].get("last_crawled")
                ts = (datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
                      if raw else 0.0)
                out[doc["_id"]] = max(out.get(doc["_id"], 0.0), ts)
        return out

    async def newest(self, fp: str) -> tuple[dict[str, Any], int | None] | None:
        """The newest ``url_meta`` document of a URL and the HTTP status of its newest
        ``url_dedup`` twin, or None when warm has no page of it."""
        resp = await self.es.search(index=self.layout.alias("url_meta"),
                                    query={"term": {"url_hash": fp}},
                                    sort=[{"crawled_at": {"order": "desc"}}], size=1)
        hits = resp["hits"]["hits"]
        if not hits:
            return None
        dedup = await self.es.search(index=self.layout.alias("url_dedup"),
                                     query={"term": {"url_hash": fp}},
                                     sort=[{"last_crawled": {"order": "desc"}}], size=1)
        status = None
        if dedup["hits"]["hits"]:
            raw = dedup["hits"]["hits"][0]["_source"].get("http_status")
            status = int(raw) if raw not in (None, "") else None
        return hits[0]["_source"], status

    async def docs_per_week(self, family: str = "url_dedup") -> dict[str, int]:
        """Documents of a family (``url_dedup`` or ``url_meta``) per weekly index
        (``IYYYIW`` → count), after a refresh."""
        pattern = f"{self.layout.alias(family)}-*"
        await self.es.indices.refresh(index=pattern, ignore_unavailable=True,
                                      allow_no_indices=True)
        agg = await self.es.search(index=pattern, size=0, ignore_unavailable=True,
                                   allow_no_indices=True,
                                   aggs={"weeks": {"terms": {"field": "_index", "size": 1000}}})
        return {b["key"].rsplit("-", 1)[-1]: int(b["doc_count"])
                for b in agg.get("aggregations", {}).get("weeks", {}).get("buckets", [])}

    async def count(self, family: str) -> int:
        """Documents in a family's weekly indices."""
        stats = await self.es.cat.indices(index=f"{self.layout.alias(family)}-*", format="json")
        rows: list[dict[str, Any]] = stats.body if isinstance(stats.body, list) else []
        return sum(int(row.get("docs.count") or 0) for row in rows)

    async def refresh(self, family: str) -> None:
        """Make a family's recent writes searchable."""
        await self.es.indices.refresh(index=f"{self.layout.alias(family)}-*",
                                      ignore_unavailable=True)

    async def accessed_before(self, family: str, cutoff: datetime, skip: set[str],
                              size: int) -> list[dict[str, Any]]:
        """Up to ``size`` documents (``_id``, ``_index``) of a family whose last access is
        before ``cutoff``, less the ids in ``skip``. No sort and no cursor: what a caller
        deletes or refreshes leaves the range, so the next call is the next work (sorted
        scans make the emulator's deletes slow)."""
        query: dict[str, Any] = {"range": {"last_access": {"lt": cutoff.isoformat()}}}
        if skip:
            query = {"bool": {"filter": [query],
                              "must_not": [{"ids": {"values": sorted(skip)}}]}}
        resp = await self.es.search(index=f"{self.layout.alias(family)}-*", size=size,
                                    query=query, source=False, ignore_unavailable=True,
                                    allow_no_indices=True)
        return list(resp["hits"]["hits"])
