"""Each source's learned URL equivalence rules (``stratacrawl.urls.equivalence``): mined
from the pages a crawl fetched, stored in cold (``url_rules``), cached in hot, and applied
in discovery, ``submit`` and when tasks are claimed.

A crawl mines its sources every few seconds: the pages fetched since its last pass
(each URL's last content fingerprint, status 200: read from ``url_state`` once, then from
the feed of URL-state changes, ``warm_outbox``) join an in-memory sample
(the newest ``SAMPLE_LIMIT`` per source), the sample's rules are re-derived and their
evidence stored — evidence only grows, so a restarted miner that sees less for a while
neither deactivates nor un-revokes a rule. A source's ``url_rules`` in ``sources.yaml``
pins rules (always applied) or forbids them (never learned). Applied after static
canonicalization, an active rule maps a variant onto the URL already known, so dedup
skips it; a variant queued before the rule was learned is marked ``REDUNDANT`` when
claimed, counted, never fetched; a revoked rule's redundant tasks are due again. One
variant in ``VERIFY_EVERY`` is fetched all the same, so an active rule keeps meeting the
evidence that could revoke it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from urllib.parse import urlsplit

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.url_rules import (
    CanonicalCounts,
    fetched_pages,
    load_rules,
    save_canonical_counts,
    save_rules,
)
from stratacrawl.cold.url_state import statuses
from stratacrawl.errors import InvalidURL
from stratacrawl.hot import caches
from stratacrawl.hot.client import HotRedis
from stratacrawl.sources import Source
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.urls.equivalence import Rule, mine, state_of

log = logging.getLogger(__name__)

SAMPLE_LIMIT = 20_000    # fetched pages per source the miner keeps in memory
READ_LIMIT = 5_000       # new fetched pages read per source and pass
CACHE_S = 2.0            # how long a process keeps a source's active rules
MINING_SHARE = 0.05      # a source is mined again after 1/MINING_SHARE times its last pass
# A pass re-derives the rules from the whole sample, so it costs O(sample): run whenever
# pages came in, a source's passes took ~5 % of a core for as long as pages trickled in
# (on slow sites, a cost per second rather than per page). Once a pass leaves no rule a
# candidate (each active, revoked, or none found) and no page since brought evidence (its
# content already in the sample under another URL, or a rel=canonical to another URL),
# the next waits until the sample grew by ``GROWTH`` of what that pass saw, or ``STALE_S``
# went by with new pages: the work of all passes stays a small multiple of one pass over
# the final sample. Evidence, or a rule still a candidate, brings the passes back to the
# pages' pace, so a rule turns active as soon as its pairs are in.
GROWTH = 0.25
STALE_S = 30.0
# Other processes' pages (the outbox) are read every OUTBOX_EVERY_S; this process's own
# come in at once (``observe``). Read at every pass, the outbox was a query per source
# every half second whatever came in — on sites that answer slowly, where pages trickle
# in, a cost per second rather than per page (a fifth of PostgreSQL's CPU in a crawl of
# such sites).
OUTBOX_EVERY_S = 5.0
REFRESH_S = 60.0         # unchanged evidence is stored again (its last_seen) this often


@dataclass
class _Sample:
    pages: dict[str, tuple[str, str]] = field(default_factory=dict)  # URL → (content, path)
    declared: dict[str, str] = field(default_factory=dict)  # URL → its rel=canonical URL
    cursor: int | None = None   # where the next read goes on (cold/url_rules.fetched_pages)
    fresh: int = 0              # pages added since the rules were last derived
    derived_from: int = 0       # the sample's size when they were
    derived_at: float = -1e9    # and when (monotonic)
    candidates: bool = True     # that pass left a rule a candidate (or none ran yet)
    evidence: int = 0           # pages that brought evidence, so far
    derived_evidence: int = 0   # ... when the rules were last derived
    contents: Counter[str] = field(default_factory=Counter)   # the pages' content fingerprints
    read_at: float = -1e9       # monotonic time of the last outbox read
    active: tuple[str, ...] = ()
    next_pass: float = 0.0   # monotonic time; passes cost O(sample), so they are spaced out
    # What the last pass stored, and when (monotonic): a pass that finds the same evidence
    # writes nothing until ``REFRESH_S`` has passed (it only refreshes ``last_seen``).
    saved: tuple[object, ...] | None = None
    saved_at: float = 0.0


def _uncount(counts: Counter[str], key: str) -> None:
    if counts[key] <= 1:
        del counts[key]
    else:
        counts[key] -= 1


class UrlRules:
    """Each source's active rules (cached in hot and in-process) and their mining."""

    def __init__(self, *, pool: AsyncConnectionPool, redis: HotRedis | None) -> None:
        """``redis``: the hot tier, where active rules are published; ``None``, cold only."""
        self.pool = pool
        self.redis = redis
        self._cache: dict[str, tuple[float, tuple[Rule, ...]]] = {}
        self._states: dict[str, tuple[float, dict[Rule, str]]] = {}
        self._samples: dict[str, _Sample] = {}
        self._canonical: dict[str, str | None] = {}
        self._writers: set[str] = set()   # staging writers of the pages ``observe`` took

    async def active(self, source_id: str, forbidden: Sequence[Rule] = ()) -> tuple[Rule, ...]:
        """The learned rules active for the source now, less those it forbids (its pinned
        ones come from the sources file)."""
        now = time.monotonic()
        hit = self._cache.get(source_id)
        if hit is None or hit[0] < now:
            learned = await self._learned(source_id)
            self._cache[source_id] = (now + CACHE_S, learned)
        else:
            learned = hit[1]
        return tuple(sorted(set(learned) - set(forbidden)))

    async def of(self, source: Source) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
        """(pinned, learned) rules of the source: those its ``url_rules`` pins, and the
        learned ones active now that it does not forbid."""
        return source.url_rules.pinned, await self.active(source.id, source.url_rules.forbidden)

    async def states(self, source_id: str) -> dict[Rule, str]:
        """Every rule the source's evidence has named, and its state (``candidate``,
        ``active``, ``revoked``): read from cold, kept for ``CACHE_S``."""
        now = time.monotonic()
        hit = self._states.get(source_id)
        if hit is not None and hit[0] >= now:
            return hit[1]
        states = {Rule.parse(r.rule): r.state for r in await load_rules(self.pool, source_id)}
        self._states[source_id] = (now + CACHE_S, states)
        return states

    async def _learned(self, source_id: str) -> tuple[Rule, ...]:
        published = None
        if self.redis is not None:
            try:
                published = await caches.url_rules(self.redis, source_id)
            except Exception:   # hot away: cold answers
                published = None
        if published is not None:
            return tuple(Rule.parse(t) for t in published)
        rows = await load_rules(self.pool, source_id)
        texts = [r.rule for r in rows if r.state == "active"]
        await self._publish(source_id, texts)
        return tuple(Rule.parse(t) for t in texts)

    async def _publish(self, source_id: str, texts: Sequence[str]) -> None:
        if self.redis is None:
            return
        try:
            await caches.publish_url_rules(self.redis, source_id, texts)
        except Exception as e:   # a cache: cold stays the truth
            log.warning("url rules: hot cache not written for %s: %s", source_id, e)
        self._cache.pop(source_id, None)

    def _canonical_of(self, url: str) -> str | None:
        known = self._canonical.get(url, "")
        if known != "":
            return known
        try:
            canonical: str | None = canonicalize(url)
        except InvalidURL:
            canonical = None
        if len(self._canonical) > 4 * SAMPLE_LIMIT:
            self._canonical.clear()
        self._canonical[url] = canonical
        return canonical

    async def _declared_pairs(self, sample: _Sample) -> tuple[dict[str, str], CanonicalCounts]:
        """The sample's rel=canonical links that are evidence, and the count of those
        ignored: pointing to another host, to a page that answered an error, or to a page
        that itself names another canonical URL (a loop or a chain)."""
        counts = CanonicalCounts()
        candidates: list[tuple[str, str]] = []
        for url, target in sample.declared.items():
            if target == url:
                continue   # the page names itself: the usual case, no evidence
            if urlsplit(target)[:2] != urlsplit(url)[:2]:
                counts.off_host += 1
            elif sample.declared.get(target, target) != target:
                counts.looped += 1
            else:
                candidates.append((url, target))
        unknown = {t: canonical_fingerprint(t) for _, t in candidates if t not in sample.pages}
        status = await statuses(self.pool, list(unknown.values()))
        pairs: dict[str, str] = {}
        for url, target in candidates:
            code = status.get(unknown[target]) if target in unknown else 200
            if code is None:
                continue   # not fetched yet: judged in a later pass
            if code >= 400:
                counts.missing += 1
            else:
                pairs[url] = target
        counts.used = len(pairs)
        return pairs, counts

    async def mine(self, source_id: str, forbidden: Sequence[Rule] = (), *,
                   force: bool = False) -> bool:
        """Read the source's pages fetched since the last pass, re-derive its rules and
        store them (``force``: even if the last pass was a moment ago); True when its
        active rules changed."""
        sample = self._samples.setdefault(source_id, _Sample())
        started = time.monotonic()
        if started < sample.next_pass and not force:
            return False
        try:
            return await self._mine(source_id, sample, forbidden, force)
        finally:
            sample.next_pass = started + (time.monotonic() - started) / MINING_SHARE

    async def learn(self, source: Source, *, force: bool = False) -> bool:
        """``mine`` for a source that learns its rules (less those it forbids); True when
        its active rules changed. A pass that fails is logged and changes nothing:
        learning is an optimisation, the crawl goes on without it."""
        if not source.url_rules.learn:
            return False
        try:
            return await self.mine(source.id, source.url_rules.forbidden, force=force)
        except Exception as e:
            log.warning("URL rules of %s not mined (%r)", source.id, e)
            return False

    def observe(self, source_id: str, url: str, content_hash: str,
                declared: str | None, writer: str) -> None:
        """A page this process fetched just now (status 200), into the source's sample at
        once: the next pass learns from it without waiting for the page's staging flush
        and the outbox (a short crawl could end before its first rule applied). ``writer``
        is the staging writer that lands it (its run id): the outbox entries that writer
        queues are not read back. Pages that other processes fetch still come through
        the outbox."""
        self._writers.add(writer)
        sample = self._samples.setdefault(source_id, _Sample())
        self._add(sample, url, content_hash, declared)

    def _add(self, sample: _Sample, url: str, content: str, declared: str | None) -> None:
        canonical = self._canonical_of(url)
        if canonical is None:
            return
        sample.fresh += 1
        before = sample.pages.pop(canonical, None)   # newest last: eviction drops the oldest
        if before is not None:
            _uncount(sample.contents, before[0])
        target = self._canonical_of(declared) if declared else None
        if sample.contents[content] or (target is not None and target != canonical):
            sample.evidence += 1   # another URL with this content, or one it names
        sample.contents[content] += 1
        sample.pages[canonical] = (content, urlsplit(canonical).path)
        sample.declared.pop(canonical, None)
        if target is not None:
            sample.declared[canonical] = target
        if len(sample.pages) > SAMPLE_LIMIT:
            oldest = next(iter(sample.pages))
            sample.declared.pop(oldest, None)
            _uncount(sample.contents, sample.pages.pop(oldest)[0])

    async def _mine(self, source_id: str, sample: _Sample, forbidden: Sequence[Rule],
                    force: bool = False) -> bool:
        now = time.monotonic()
        if force or now - sample.read_at >= OUTBOX_EVERY_S:
            rows, sample.cursor = await fetched_pages(
                self.pool, source_id, sample.cursor, READ_LIMIT,
                skip_writers=sorted(self._writers))
            sample.read_at = now
            for url, content, _, declared in rows:
                self._add(sample, url, content, declared)
        settled = not sample.candidates and sample.evidence == sample.derived_evidence
        if not sample.fresh or not (force or not settled
                                    or sample.fresh >= GROWTH * sample.derived_from
                                    or now - sample.derived_at >= STALE_S):
            return False
        sample.fresh, sample.derived_from, sample.derived_at = 0, len(sample.pages), now
        sample.derived_evidence = sample.evidence
        pairs, counts = await self._declared_pairs(sample)
        stats = mine(sample.pages, declared=pairs, forbidden=forbidden)
        evidence_rows = [(r.text(), state_of(s), s.support, s.counterexamples, s.example)
                         for r, s in stats.items()]
        sample.candidates = any(row[1] == "candidate" for row in evidence_rows)
        # Passes come every few seconds while a source is fetched; most find what the
        # last one found. Storing it again would be four statements a source a pass.
        evidence = (astuple(counts), evidence_rows)
        if evidence == sample.saved and time.monotonic() - sample.saved_at < REFRESH_S:
            return False
        await save_canonical_counts(self.pool, source_id, counts)
        if evidence_rows:
            await save_rules(self.pool, source_id, evidence_rows)
        sample.saved, sample.saved_at = evidence, time.monotonic()   # stored: not again
        if not evidence_rows:
            return False
        active = tuple(sorted(r.rule for r in await load_rules(self.pool, source_id)
                              if r.state == "active"))
        if active == sample.active:
            return False
        await self._publish(source_id, active)
        sample.active = active
        log.info("url rules of %s now: %s", source_id, ", ".join(active) or "none")
        return True
