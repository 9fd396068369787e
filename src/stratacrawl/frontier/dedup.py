"""Dedup: is a URL new, queued, crawled recently (skip) or crawled long ago (due again)?

The chain for a batch of fingerprints:
1. a 300 ms in-process cache absorbs bursts of identical checks;
2. the Bloom filter: a negative is certainly new (and is added, atomically) — unless the
   filter is not ready (Redis lost it and recovery has not rebuilt it yet): then every
   fingerprint takes the exact path, slower and still right;
3. on a positive, the exact check: hot URL state (read in the same moment as the
   filter), then warm (``mget`` by URL hash over the weekly ``url_dedup`` indices of the
   window) for what hot does not know, then cold (``url_state``);
4. a re-referenced URL is promoted to hot URL state (hits, last access).
When warm is down the chain goes straight to cold: slower, never wrong.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from enum import StrEnum

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.url_state import last_crawled
from stratacrawl.hot.bloom import BloomFilter
from stratacrawl.hot.url_state import HotURLState
from stratacrawl.warm.store import WarmStore

log = logging.getLogger(__name__)


PROMOTE_EVERY_S = 0.05
# Batches up to this size (a list page's links) ask hot beside the Bloom filter, in one
# round trip; larger ones (bulk) ask it after, about the positives only.
HOT_BESIDE_BLOOM_MAX = 1000
# A handful of URLs that hot does not hold (a lone link, a submission) are asked of warm
# and cold at once: the wait for warm, then cold's own round trip, was the whole tail of a
# single check, and cold answers a few keys by index for next to nothing. Larger sets wait
# ``hedge_s`` for warm first: sparing cold those lookups is what warm is for.
ASK_BOTH_MAX = 8


class Seen(StrEnum):
    NEW = "new"          # never seen: enqueue
    QUEUED = "queued"    # known, not crawled yet: skip
    RECENT = "recent"    # crawled within the window: skip
    STALE = "stale"      # crawled before the window: due again


class Dedup:
    """Batch dedup over the three tiers."""

    def __init__(self, *, bloom: BloomFilter, hot: HotURLState, pool: AsyncConnectionPool,
                 warm: WarmStore | None,
                 window: timedelta = timedelta(days=7), cache_ttl_s: float = 0.3,
                 hedge_s: float = 0.001, ask_both_max: int = ASK_BOTH_MAX) -> None:
        self.bloom = bloom
        self.hot = hot
        self.pool = pool
        self.warm = warm
        self.window = window
        self.cache_ttl_s = cache_ttl_s
        self.hedge_s = hedge_s
        self.ask_both_max = ask_both_max
        self._cache: dict[str, tuple[float, Seen, float | None]] = {}
        self._next_sweep = 0.0
        self._touched: list[str] = []
        self._promote: dict[str, dict[str, str | int | float | None]] = {}
        self._flusher: asyncio.Future[None] | None = None
        self.stats: dict[str, int] = {"cache": 0, "bloom_new": 0, "hot": 0, "warm": 0, "cold": 0,
                                      "bloom_false_positive": 0, "warm_errors": 0, "hedged": 0}

    def _age_verdict(self, last_crawled: float | None, now: float) -> Seen:
        if last_crawled is None:
            return Seen.QUEUED
        return Seen.RECENT if now - last_crawled < self.window.total_seconds() else Seen.STALE

    async def check(self, fps: Sequence[str], crawled: dict[str, float] | None = None
                    ) -> list[Seen]:
        """The verdict of each fingerprint; ``crawled`` (if given) is filled with the last
        crawl time (epoch seconds) of those known to have been crawled."""
        now = time.time()
        out: dict[str, Seen] = {}
        ages: dict[str, float] = {}
        todo: list[str] = []
        for fp in dict.fromkeys(fps):
            hit = self._cache.get(fp)
            if hit and hit[0] > now:
                out[fp] = hit[1]
                if hit[2] is not None:
                    ages[fp] = hit[2]
                self.stats["cache"] += 1
            else:
                todo.append(fp)
        if todo:
            # The Bloom filter and the hot tier are asked at once: one round trip on the
            # list hop's path, not two (hot answers most known URLs; a new one costs a
            # miss). A bulk batch (a sitemap, a recovery) asks hot after the filter, only
            # about its positives: there throughput counts, and most URLs are new.
            if len(todo) <= HOT_BESIDE_BLOOM_MAX:
                (seen_before, ready), hot = await asyncio.gather(
                    self.bloom.check_and_add_ready(todo), self.hot.last_crawled_many(todo))
            else:   # bulk: hot is asked only about what the filter may have seen
                seen_before, ready = await self.bloom.check_and_add_ready(todo)
                hot = None
            if not ready:
                seen_before = [True] * len(todo)
            maybe_fps = [fp for fp, seen in zip(todo, seen_before, strict=True) if seen]
            if hot is None:
                maybe = list(zip(maybe_fps, await self.hot.last_crawled_many(maybe_fps),
                                 strict=True))
            else:
                known = dict(zip(todo, hot, strict=True))
                maybe = [(fp, known[fp]) for fp in maybe_fps]
            for fp in set(todo) - {fp for fp, _ in maybe}:
                out[fp] = Seen.NEW
            self.stats["bloom_new"] += len(todo) - len(maybe)
            if maybe:
                out.update(await self._exact(maybe, now, ages))
            self._remember(todo, out, ages, now)
        if crawled is not None:
            crawled.update(ages)
        return [out[fp] for fp in fps]

    def _remember(self, fps: list[str], verdicts: dict[str, Seen], ages: dict[str, float],
                  now: float) -> None:
        if self.cache_ttl_s <= 0:
            return
        if now >= self._next_sweep:  # expired entries go in one pass, at most every TTL
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
            self._next_sweep = now + self.cache_ttl_s
        expiry = now + self.cache_ttl_s
        for fp in fps:
            self._cache[fp] = (expiry, verdicts[fp], ages.get(fp))

    async def _exact(self, maybe: list[tuple[str, float | None]], now: float,
                     ages: dict[str, float]) -> dict[str, Seen]:
        """Verdicts of the URLs the Bloom filter may have seen, given when hot says each
        was last crawled (None: hot does not know it).
        What hot does not answer goes to warm; if warm has not answered within
        ``hedge_s``, cold (the truth) is asked too and whichever answers first decides —
        a slow warm node does not set the tail latency, and a fast one still keeps the
        load off cold. Up to ``ask_both_max`` such URLs go to both at once."""
        found: dict[str, Seen] = {}
        promote: dict[str, dict[str, str | int | float | None]] = {}
        touched, pending = [], []
        for fp, hot_crawled in maybe:
            if hot_crawled is not None:
                found[fp] = self._age_verdict(hot_crawled, now)
                ages[fp] = hot_crawled
                touched.append(fp)
                self.stats["hot"] += 1
            else:
                pending.append(fp)
        warm: dict[str, float] = {}
        cold_task: asyncio.Future[dict[str, float | None]] | None = None
        if pending:
            warm_task = asyncio.ensure_future(self._warm_safe(pending))
            done: set[asyncio.Future[dict[str, float]]] = set()
            if len(pending) > self.ask_both_max:
                done, _ = await asyncio.wait({warm_task}, timeout=self.hedge_s)
            if not done:
                cold_task = asyncio.ensure_future(self._cold(pending))
                self.stats["hedged"] += 1
                await asyncio.wait({warm_task, cold_task}, return_when=asyncio.FIRST_COMPLETED)
            if cold_task is None or warm_task.done():
                warm = await warm_task
            elif all(fp in cold_task.result() for fp in pending):
                warm_task.cancel()  # cold answered first, for every URL: warm is not needed
            else:  # cold lacks some (Bloom false positives, usually): hear warm out too
                warm = await warm_task
        rest = []
        for fp in pending:
            if fp in warm:
                found[fp] = self._age_verdict(warm[fp], now)
                ages[fp] = warm[fp]
                promote[fp] = {"lc": warm[fp], "h": 1, "la": now}
                self.stats["warm"] += 1
            else:
                rest.append(fp)
        if rest:
            cold = await (cold_task if cold_task is not None else self._cold(rest))
            for fp in rest:
                if fp in cold:
                    found[fp] = self._age_verdict(cold[fp], now)
                    self.stats["cold"] += 1
                    if cold[fp] is not None:
                        ages[fp] = cold[fp]  # type: ignore[assignment]
                        promote[fp] = {"lc": cold[fp], "h": 1, "la": now}
                else:
                    found[fp] = Seen.NEW
                    self.stats["bloom_false_positive"] += 1
        elif cold_task is not None and not cold_task.done():
            cold_task.cancel()
        # Promotion and hit counting are bookkeeping: off the answer's critical path, and
        # coalesced into one pipeline per PROMOTE_EVERY_S.
        self._touched.extend(touched)
        self._promote.update(promote)
        if (touched or promote) and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.ensure_future(self._flush_promotions())
        return found

    async def _flush_promotions(self) -> None:
        await asyncio.sleep(PROMOTE_EVERY_S)
        touched, promote = self._touched, self._promote
        self._touched, self._promote = [], {}
        try:
            await self.hot.record(touched, promote)
        except Exception as e:  # hot state is a cache: a failed promotion loses nothing
            log.warning("dedup: promotion to hot failed: %s", e)

    async def flush(self) -> None:
        """Write pending promotions now (tests, shutdown)."""
        if self._flusher is not None:
            await self._flusher

    async def _warm_safe(self, fps: list[str]) -> dict[str, float]:
        if self.warm is None:
            return {}
        try:
            return await self._warm(fps)
        except Exception as e:  # warm is optional: degrade to cold
            self.stats["warm_errors"] += 1
            log.warning("dedup: warm tier unavailable, using cold: %s", e)
            return {}

    async def _warm(self, fps: list[str]) -> dict[str, float]:
        assert self.warm is not None
        return await self.warm.last_crawled(fps, self.window.days)

    async def _cold(self, fps: list[str]) -> dict[str, float | None]:
        return await last_crawled(self.pool, fps)
