"""Discovery: links → scope → canonical form (and the source's learned URL rules) →
dedup → ledger.

Every dropped link is counted by reason (malformed, relative garbage, ``javascript:``,
private network, out of scope, robots, …); nothing raises out of ``discover``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from stratacrawl.cold.tasks import URGENT, NewTask
from stratacrawl.errors import InvalidURL
from stratacrawl.frontier.dedup import Dedup, Seen
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.links import extract
from stratacrawl.frontier.recrawl import FRESH_CADENCES
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.sources import Source
from stratacrawl.urls import canonical_fingerprint, canonicalize, check_target, resolve
from stratacrawl.urls.equivalence import Rule, rewrite

# Links per discovery step; the event loop runs between steps (~30-50 ms of work each).
CHUNK_LINKS = 1_000


@dataclass
class DiscoveryStats:
    links: int = 0
    queued: int = 0
    requeued: int = 0
    known: int = 0
    fresh: int = 0   # of the known: items crawled within fresh_s
    dropped: Counter[str] = field(default_factory=Counter)

    @property
    def news(self) -> bool:
        """Whether the page showed news: a link new to the crawl, a stale one queued again,
        or an item fetched lately (another page told of it first)."""
        return self.queued + self.requeued + self.fresh > 0

    def merge(self, other: DiscoveryStats) -> None:
        self.links += other.links
        self.queued += other.queued
        self.requeued += other.requeued
        self.known += other.known
        self.fresh += other.fresh
        self.dropped.update(other.dropped)


def classify(source: Source, url: str, kinds: frozenset[str] | None = None) -> str | None:
    """``list``, ``item`` or ``None`` (out of scope) for a canonical URL of this source
    (``kinds``: its :meth:`Source.kinds_of`, when the caller has them)."""
    kinds = source.kinds_of(url) if kinds is None else kinds
    if source.allow and "allow" not in kinds:
        return None
    if "items" in kinds:
        return "item"
    if "follow" in kinds:
        return "list"
    return None


def priority_of(source: Source, kind: str) -> int:
    """A new task's priority: the source's for items, one more for the pages that lead to
    items (seeds, lists, sitemaps). A list page found while a hundred items wait is
    fetched next, not after them: on a site answering in seconds, the chain of list
    pages is what keeps the queue full, and walking it late leaves slots idle at the end.
    Urgent submissions stay ahead of both."""
    return source.priority if kind == "item" else min(source.priority + 1, URGENT - 1)


class Discovery:
    def __init__(self, *, frontier: Frontier, dedup: Dedup, rules: UrlRules | None = None) -> None:
        self.frontier = frontier
        self.dedup = dedup
        self.rules = rules

    async def _rules_of(self, source: Source) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
        """(pinned, learned) URL rules of the source."""
        if self.rules is None:
            return source.url_rules.pinned, ()
        return await self.rules.of(source)

    def _prepare(self, source: Source, base: str | None, hrefs: Sequence[str | bytes],
                 stats: DiscoveryStats, kind: str | None = None,
                 default_kind: str | None = None,
                 rules: tuple[Sequence[Rule], Sequence[Rule]] = ((), ()),
                 ) -> list[tuple[str, str, str]]:
        """(wire URL, fingerprint, kind) of the links worth a dedup check."""
        out: dict[str, tuple[str, str, str]] = {}
        for href in hrefs:
            stats.links += 1
            try:
                if isinstance(href, bytes):
                    href = href.decode("utf-8")
                url = resolve(base, href) if base else href
                canonical = rewrite(canonicalize(url), *rules)
                check_target(canonical, allow_private=source.allow_private_networks)
            except UnicodeDecodeError:
                stats.dropped["not-utf8"] += 1
                continue
            except InvalidURL as e:
                stats.dropped[e.reason] += 1
                continue
            # ``allow`` bounds every path but the seeds (an urgent submission too); within
            # it, a URL matching neither follow nor items takes ``default_kind``.
            kinds = source.kinds_of(canonical)
            in_scope = kind is not None or not source.allow or "allow" in kinds
            link_kind = (kind or classify(source, canonical, kinds) or default_kind
                         ) if in_scope else None
            if link_kind is None:
                stats.dropped["out-of-scope"] += 1
                continue
            fp = canonical_fingerprint(canonical)
            out.setdefault(fp, (url, fp, link_kind))
        return list(out.values())

    async def discover(self, source: Source, base: str | None, hrefs: Sequence[str | bytes],
                       depth: int = 1, trace_id: str | None = None,
                       fresh_s: float = 0.0) -> DiscoveryStats:
        """Enqueue the new and the stale links found on ``base``, ``CHUNK_LINKS`` at a
        time: canonical forms and fingerprints cost ~30 us a link, and a 50,000-URL sitemap
        in one step held the event loop (every request in flight) for over a second.
        Known item links fetched within ``fresh_s`` are counted ``fresh``: news this page
        carries too, though another page told it first."""
        stats = DiscoveryStats()
        for i in range(0, len(hrefs), CHUNK_LINKS):
            await self._discover(source, base, hrefs[i:i + CHUNK_LINKS], depth, trace_id,
                                 stats, fresh_s)
        return stats

    async def discover_page(self, source: Source, url: str, body: bytes,
                            content_type: str | None) -> DiscoveryStats:
        """The links of a fetched seed, list or sitemap page (``url``: where it was
        fetched from, after redirects; ``body``: uncompressed) into the frontier. Known
        items fetched within ``FRESH_CADENCES`` of the source's cadence count as news."""
        return await self.discover(source, url, extract(body, content_type),
                                   fresh_s=FRESH_CADENCES * source.cadence_td.total_seconds())

    async def _discover(self, source: Source, base: str | None, hrefs: Sequence[str | bytes],
                        depth: int, trace_id: str | None, stats: DiscoveryStats,
                        fresh_s: float) -> None:
        candidates = self._prepare(source, base, hrefs, stats,
                                   rules=await self._rules_of(source))
        if not candidates:
            return
        crawled: dict[str, float] = {}
        verdicts = await self.dedup.check([fp for _, fp, _ in candidates], crawled)
        since = time.time() - fresh_s
        fresh, stale = [], []
        for (url, fp, kind), verdict in zip(candidates, verdicts, strict=True):
            task = NewTask(source.id, url, fp, kind, priority_of(source, kind), depth=depth,
                           trace_id=trace_id)
            if verdict is Seen.NEW:
                fresh.append(task)
            elif verdict is Seen.STALE:
                stale.append(task)
            else:
                stats.known += 1
                # (list pages link each other, and those recur: only items are news)
                stats.fresh += kind == "item" and crawled.get(fp, 0.0) >= since
        queued = await self.frontier.add(fresh)
        stats.queued += queued
        stats.requeued += await self.frontier.add(stale, on_conflict="requeue")
        stats.known += len(fresh) - queued

    async def seed(self, source: Source) -> DiscoveryStats:
        """The source's seeds into the ledger (once), and finished lists due again re-armed."""
        stats = DiscoveryStats()
        candidates = self._prepare(source, None, source.seeds, stats, kind="seed",
                                   rules=await self._rules_of(source))
        await self.dedup.bloom.check_and_add([fp for _, fp, _ in candidates])
        stats.queued = await self.frontier.add(
            [NewTask(source.id, url, fp, "seed", priority_of(source, "seed"))
             for url, fp, _ in candidates])
        stats.requeued = await self.frontier.ledger.rearm(source.id, source.cadence_td)
        return stats

    async def submit(self, source: Source, urls: Sequence[str]) -> DiscoveryStats:
        """Urgent URLs: ahead of every scheduled task of the source, crawled even if known.
        URLs outside the source's ``allow`` scope, or on a private network it does not
        allow, are refused (counted in ``dropped`` by reason)."""
        stats = DiscoveryStats()
        # An urgent URL outside follow/items is still fetched, as an item.
        candidates = self._prepare(source, None, urls, stats, default_kind="item",
                                   rules=await self._rules_of(source))
        await self.dedup.bloom.check_and_add([fp for _, fp, _ in candidates])
        stats.queued = await self.frontier.add(
            [NewTask(source.id, url, fp, kind, URGENT) for url, fp, kind in candidates],
            on_conflict="urgent")
        return stats
