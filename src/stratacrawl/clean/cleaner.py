"""The cleaner: claims staged pages not yet cleaned, extracts, and upserts their records.

Several cleaners can run at once: a batch is claimed with ``FOR UPDATE SKIP LOCKED`` on
the ``clean_state = 'new'`` rows (the partial index ``staging_uncleaned`` is the watermark
of each day partition) and released by the same transaction that lands its records, so a
crash re-cleans the batch at most, and fingerprints make that harmless. A page that yields
nothing or misses a required field becomes ``format_error``: never retried, kept for
re-cleaning after a rule fix (:meth:`Cleaner.reclean`).

Parse results are cached in the hot tier for 30 minutes, keyed by the page's content and
the source's rules, so an unchanged page fetched again is not parsed again.

A record's identity is its item (``cold/records.py``): the canonical URL the page declares
(or its final URL after redirects) under the source's URL rules, pinned and learned — the
same rules that keep the frontier from fetching a variant twice — so a variant that was
fetched anyway (before a rule was learned, or as a rule's verification fetch) updates the
item's record instead of adding one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import Any

import orjson
import redis.asyncio as aioredis
from psycopg_pool import AsyncConnectionPool

from stratacrawl.clean.coerce import take_unknown_timezones
from stratacrawl.clean.extract import Extracted, Extractor, Page, extractor_for
from stratacrawl.clean.records import record_fingerprint
from stratacrawl.clean.stats import CleanStats, SourceCleanStats
from stratacrawl.cold.records import (
    Record,
    UpsertResult,
    ensure_partitions,
    keyed_under,
    rekey,
    upsert,
)
from stratacrawl.cold.staging import (
    CleanOutcome,
    claim_for_cleaning,
    decode_body,
    mark_cleaned,
    requeue_for_cleaning,
)
from stratacrawl.errors import FormatError, InvalidURL
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.hot import cleaned
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.parse_cache import PARSE_CACHE_TTL_S, ParseCache
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.urls.equivalence import Rule, apply, candidates

log = logging.getLogger(__name__)
BATCH_S = 0.25    # a claim is sized to about this much extraction
MIN_BATCH = 10
YIELD_S = 0.005   # extraction hands the event loop over at least this often
LANES = 3         # batches in flight: one extracting, one claiming, one landing
POOL_SIZE = LANES + 1   # connections a cleaner needs: its lanes' and a partition's
FOLLOW_POLL_S = 1.0     # ``follow`` with nothing staged: how often a cleaner looks again
REKEY_S = 60.0          # how often a following cleaner looks for changed URL rules


@dataclass
class _Claimed:
    fetched_at: datetime
    id: int
    source_id: str
    task_id: int | None
    url: str
    final_url: str | None
    content_type: str | None
    body: bytes | None
    trace_id: str | None
    cleaned_before: bool
    body_encoding: str


class _Lanes:
    """What a run's batches in flight share: one is extracted at a time (``turn``: the
    process's CPU) and one more at most waits for its turn, claimed (``ahead``), so
    extraction never waits for a claim's round trip; the others land. Claimed pages wait
    in one batch at most: at the end of a backlog, a process does not sit on pages that
    another, idle, could clean."""

    def __init__(self) -> None:
        self.turn = asyncio.Lock()
        self.ahead = asyncio.Semaphore(1)


class Cleaner:
    """Staging → records for the sources of one sources file."""

    def __init__(self, *, pool: AsyncConnectionPool, redis: HotRedis | None,
                 sources: SourcesFile, batch_size: int = 200,
                 cache_ttl_s: int = PARSE_CACHE_TTL_S) -> None:
        self.pool = pool
        self.cache = ParseCache(redis=redis, ttl_s=cache_ttl_s) if redis is not None else None
        self._redis = redis
        self.sources = sources
        self.batch_size = batch_size
        self._page_s: float | None = None   # extraction seconds a page, smoothed
        self._extractors: dict[str, Extractor] = {s.id: extractor_for(s) for s in sources.sources}
        self._rules_key = {s.id: hashlib.blake2b(s.extract.model_dump_json().encode(),
                                                 digest_size=8).hexdigest()
                           for s in sources.sources}
        self._partitions: set[tuple[str, date]] = set()   # record partitions known to exist
        self._url_rules = UrlRules(pool=pool, redis=redis)
        self._partitioning = asyncio.Lock()

    # -- one page ---------------------------------------------------------------------------
    def extract(self, source: Source, page: Page) -> list[Extracted]:
        """The page's records, or :class:`FormatError` if it does not fit the source's rules."""
        found = self._extractors[source.id].extract(page)
        if not found:
            raise FormatError("nothing extracted", url=page.url)
        for rec in found:
            missing = [f for f in source.required if rec.fields.get(f) in (None, "")]
            if missing:
                raise FormatError(f"missing required field(s): {', '.join(missing)}",
                                  url=page.url, missing=missing, fields=rec.fields)
        return found

    # -- batches ----------------------------------------------------------------------------
    async def clean_batch(self, source_ids: list[str] | None, lanes: _Lanes) -> CleanStats:
        """Claim, clean and land one batch; an empty result means nothing was left.
        ``lanes``: what the run's batches side by side share (see :class:`_Lanes`)."""
        stats = CleanStats()
        ids = source_ids or self.sources.ids
        await lanes.ahead.acquire()   # before the connection: a lane waiting holds none
        ahead = True
        try:
            async with self.pool.connection() as conn, conn.transaction():
                claimed = [_Claimed(*row) for row in await claim_for_cleaning(
                    conn, ids, self._claim_size())]
                if not claimed:
                    return stats
                async with lanes.turn:
                    lanes.ahead.release()   # the next batch may be claimed now
                    ahead = False
                    started = time.process_time()
                    records, outcomes = await self._clean(claimed, stats)
                    self._learn_pace((time.process_time() - started) / len(claimed))
                await self._ensure_partitions({(r.source_id, r.day) for r in records})
                result: UpsertResult = await upsert(
                    conn, records, [c.id for c in claimed if c.cleaned_before])
                await mark_cleaned(conn, [(c.fetched_at, c.id) for c in claimed], outcomes)
            await self._note_cleaned(records, claimed, outcomes)
        finally:
            if ahead:
                lanes.ahead.release()
        stats.pages = len(claimed)
        stats.inserted, stats.updated, stats.replaced = (result.inserted, result.updated,
                                                         result.replaced)
        return stats

    async def _note_cleaned(self, records: list[Record], claimed: list[_Claimed],
                            outcomes: list[CleanOutcome]) -> None:
        """The landed batch's items and format errors, into each source's window of pages
        cleaned last (hot), which the minute-level integrity check reads."""
        if self._redis is None:
            return
        entries: dict[str, list[str]] = {}
        for r in records:
            entries.setdefault(r.source_id, []).append(f"r:{r.url_hash}")
        for c, o in zip(claimed, outcomes, strict=True):
            if o.state == "format_error":
                entries.setdefault(c.source_id, []).append(
                    f"e:{c.fetched_at.isoformat()}|{c.id}")
        try:
            await cleaned.note(self._redis, entries)
        except aioredis.RedisError as e:   # a minute of checking lost, nothing else
            log.warning("clean: window of pages cleaned not written (%s)", e)

    async def _ensure_partitions(self, needed: set[tuple[str, date]]) -> None:
        """The record partitions of a batch, created on a connection of their own, outside
        the batch's transaction; one batch at a time, so the lanes holding connections
        need one more from the pool at most (``LANES + 1``), never one each."""
        if not needed - self._partitions:
            return
        async with self._partitioning:
            new = needed - self._partitions   # (another lane may have made them meanwhile)
            if new:
                await ensure_partitions(self.pool, new)
                self._partitions |= new

    def _claim_size(self) -> int:
        """Pages to claim: about ``BATCH_S`` of extraction at the pace measured so far
        (at most ``batch_size``). Article pages take ~5 ms each, rule pages under 1 ms: a
        fixed count would hold a slow source's pages in one process while another runs
        dry at the end of a backlog, or pay a landing per handful of fast pages."""
        if self._page_s is None:
            return min(self.batch_size, MIN_BATCH)
        return min(self.batch_size, max(MIN_BATCH, round(BATCH_S / max(self._page_s, 1e-6))))

    def _learn_pace(self, page_s: float) -> None:
        self._page_s = page_s if self._page_s is None else 0.7 * self._page_s + 0.3 * page_s

    async def _clean(self, claimed: list[_Claimed],
                     stats: CleanStats) -> tuple[list[Record], list[CleanOutcome]]:
        # The cache key digests the body as stored (zstd, ~1/4 of the bytes to hash): equal
        # stored bytes are equal content; the same content compressed by another zstd
        # version gets a key of its own — a cache miss, never a wrong hit. A hit needs no
        # decompression at all.
        keys = [ParseCache.key(c.source_id, self._rules_key[c.source_id],
                               hashlib.blake2b(c.body or b"", digest_size=16).hexdigest())
                for c in claimed]
        cached = await self._cache_get(keys)
        fresh: dict[str, bytes] = {}
        records: list[Record] = []
        outcomes: list[CleanOutcome] = []
        batch_rules: dict[str, tuple[Rule, ...]] = {}
        # Extraction is synchronous; between pages it lets the previous batch's landing
        # (in flight on the same loop) send its next statement. Held back for a whole
        # batch, that transaction would stay open — its locks held — for as long again.
        handed_over = time.perf_counter()
        for c, key, hit in zip(claimed, keys, cached, strict=True):
            if time.perf_counter() - handed_over > YIELD_S:
                await asyncio.sleep(0)
                handed_over = time.perf_counter()
            source = self.sources.get(c.source_id)
            s = stats.sources.setdefault(c.source_id, SourceCleanStats())
            s.pages += 1
            page_url = c.final_url or c.url
            encoding: str | None = None
            try:
                if hit is not None:
                    stats.cache_hits += 1
                    found, encoding = _from_cache(hit)
                else:
                    refusal = self._extractors[c.source_id].refusal(c.content_type)
                    if refusal is not None:
                        raise FormatError(refusal, url=page_url)
                    body = decode_body(c.body, c.body_encoding)
                    page = Page(page_url, c.content_type, body)
                    try:
                        found = self.extract(source, page)
                    finally:
                        s.unknown_timezones.update(take_unknown_timezones())
                        # the extractor decoded it (cached on the page); a page it did
                        # not read as text (none so far) is decoded here
                        encoding = page.decoded[1] if body else None
                    fresh[key] = orjson.dumps({"encoding": encoding, "records": [
                        [e.fields, e.canonical_url] for e in found]})
            except FormatError as e:
                s.format_errors += 1
                s.reasons[e.reason] += 1
                outcomes.append(CleanOutcome("format_error", e.reason, encoding, e.fields))
                continue
            rules = await self._rules_of(source, batch_rules)
            for ext in found:
                records.append(self._record(c, page_url, ext, rules))
            s.records += len(found)
            outcomes.append(CleanOutcome("cleaned", None, encoding))
        await self._cache_put(fresh)
        return records, outcomes

    async def key_records_under_rules(self, source_ids: list[str] | None = None) -> int:
        """When a source's URL rules changed since its records were keyed, move (or merge)
        the records whose canonical URL a rule now rewrites to the item it names: a
        variant fetched before its rule was learned becomes the one item's record.
        Returns the records moved."""
        ids = source_ids or self.sources.ids
        known = await keyed_under(self.pool, ids)
        moved = 0
        for sid in ids:
            pinned, learned = await self._url_rules.of(self.sources.get(sid))
            rules = (*pinned, *learned)
            texts = sorted(r.text() for r in rules)
            if known.get(sid, []) == texts:
                continue
            n = await rekey(self.pool, sid, texts, candidates(rules), partial(apply, rules))
            if n:
                log.info("clean: %d record(s) of %s moved to the item a URL rule names "
                         "(rules: %s)", n, sid, ", ".join(texts) or "none")
            moved += n
        return moved

    async def _rules_of(self, source: Source,
                        batch_rules: dict[str, tuple[Rule, ...]]) -> tuple[Rule, ...]:
        """The source's URL rules, pinned and learned, read once a batch."""
        rules = batch_rules.get(source.id)
        if rules is None:
            pinned, learned = await self._url_rules.of(source)
            rules = batch_rules[source.id] = (*pinned, *learned)
        return rules

    def _record(self, c: _Claimed, page_url: str, ext: Extracted,
                rules: tuple[Rule, ...]) -> Record:
        try:
            canonical = canonicalize(ext.canonical_url)
        except InvalidURL:
            canonical = canonicalize(page_url)
        if rules:
            canonical = apply(rules, canonical)
        return Record(source_id=c.source_id, day=c.fetched_at.date(),
                      fingerprint=record_fingerprint(c.source_id, canonical, ext.fields),
                      url=page_url, canonical_url=canonical, url_hash=canonical_fingerprint(canonical),
                      staging_id=c.id, task_id=c.task_id, trace_id=c.trace_id,
                      crawled_at=c.fetched_at, fields=ext.fields)

    async def _cache_get(self, keys: list[str]) -> list[Any]:
        if self.cache is None or not keys:
            return [None] * len(keys)
        try:
            return await self.cache.get_many(keys)
        except aioredis.RedisError as e:  # the cache is an optimisation: clean without it
            log.warning("clean: parse cache unavailable (%s)", e)
            return [None] * len(keys)

    async def _cache_put(self, entries: dict[str, bytes]) -> None:
        if self.cache is None or not entries:
            return
        try:
            await self.cache.put_many(entries)
        except aioredis.RedisError as e:
            log.warning("clean: parse cache unavailable (%s)", e)

    async def run(self, *, seconds: float | None = None, source_ids: list[str] | None = None,
                  follow: bool = False) -> CleanStats:
        """Clean batches until nothing is left (or ``seconds`` pass); ``follow`` waits for
        more instead of stopping (a cleaner running beside a crawl)."""
        total = CleanStats()
        t0 = time.monotonic()
        # ``LANES`` batches in flight: while one is extracted here, the next one's claim
        # (its pages' bodies, a few MB) and the last one's landing run in PostgreSQL, on a
        # core of its own (see :class:`_Lanes`). Claims skip locked pages, so no two
        # batches share one; records are written in item order, so landings side
        # by side never deadlock.
        shared = _Lanes()
        # (a pool smaller than ``POOL_SIZE``: fewer lanes, one connection left for partitions)
        n = max(1, min(LANES, self.pool.max_size - 1))

        async def lane() -> None:
            while seconds is None or time.monotonic() - t0 < seconds:
                batch = await self.clean_batch(source_ids, shared)
                if not batch.pages:
                    if not follow:
                        return
                    await asyncio.sleep(n * FOLLOW_POLL_S)   # the lanes, staggered: one
                    continue                                 # look every FOLLOW_POLL_S
                total.merge(batch)

        await self.key_records_under_rules(source_ids)

        async def rekeying() -> None:   # a following cleaner: rules change as it runs
            while follow:
                await asyncio.sleep(REKEY_S)
                try:
                    await self.key_records_under_rules(source_ids)
                except Exception as e:   # the next look tries again; cleaning goes on
                    log.warning("clean: records not keyed under new URL rules yet: %s", e)

        lanes = [asyncio.ensure_future(lane()) for _ in range(n)]
        watcher = asyncio.ensure_future(rekeying())
        try:
            done, _ = await asyncio.wait(lanes, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()   # a lane's error is the run's
        finally:  # an error or a cancellation: batches in flight roll back (reclaimed later)
            for task in (*lanes, watcher):
                task.cancel()
            await asyncio.gather(*lanes, watcher, return_exceptions=True)
        total.seconds = time.monotonic() - t0
        return total

    async def reclean(self, source_id: str, day: date, *, failed_only: bool = False) -> int:
        """Put a source-day's item pages (``failed_only``: its format errors) back in the
        queue (after a rule fix); returns how many. The next run re-extracts them and
        replaces what they produced before."""
        return await requeue_for_cleaning(self.pool, source_id, day, failed_only=failed_only)


def _from_cache(hit: str | bytes) -> tuple[list[Extracted], str | None]:
    """A parse-cache entry: the records and the encoding (entries written before the
    encoding was kept are a bare list of records)."""
    value = orjson.loads(hit)
    if isinstance(value, list):
        return [Extracted(f, u) for f, u in value], None
    return [Extracted(f, u) for f, u in value["records"]], value.get("encoding")
