"""The steps of a crawl that the Prefect flows also run on their own: seeding, discovery
of staged list pages, URL-rule mining, the spool, demotion and eviction that never stop
a crawl."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from stratacrawl.cold.staging import claim_undiscovered, decode_body, mark_discovered
from stratacrawl.cold.tasks import NewTask
from stratacrawl.errors import InvalidURL
from stratacrawl.fetch.politeness import SourceHeld
from stratacrawl.frontier.discovery import DiscoveryStats
from stratacrawl.frontier.recrawl import GROW, SHRINK
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.staging.loader import DrainReport, drain
from stratacrawl.tier_errors import POSTGRES_AWAY, TIER_DOWN
from stratacrawl.tiers.demotion import DemoteStats, demote
from stratacrawl.tiers.eviction import evict_hot
from stratacrawl.urls import canonical_fingerprint, canonicalize, check_target
from stratacrawl.wiring import Components

log = logging.getLogger(__name__)


# A tier away (PostgreSQL: the writer spools meanwhile): a crawl's side work pauses and
# tries again; it never stops the crawl.
AWAY: tuple[type[BaseException], ...] = (*POSTGRES_AWAY, *TIER_DOWN)
END_FIRST_ROWS = 1000   # the end demotion's first round; then sized to the time left


async def demote_safe(comps: Components, max_rounds: int | None = None,
                      limit: int = 5000) -> DemoteStats:
    """Demotion that never stops a crawl: PostgreSQL or Elasticsearch away → try later."""
    try:
        return await demote(comps.pool, comps.warm, limit=limit,
                            max_rounds=max_rounds)
    except AWAY as e:
        log.warning("crawl: demotion paused (%r)", e)
        return DemoteStats(error=str(e))


async def demote_at_end(comps: Components, budget_s: float | None = None) -> int:
    """A crawl's last step: committed fetches into warm, a batch at a time for up to
    ``budget_s`` (default: the ``end_demotion_s`` setting); what is left is the
    ``demotion`` deployment's (the watermark keeps it). Unbounded, a worker ending a
    30-minute load test demoted every worker's ~390 k rows first and was stopped before
    it could report; at 60 s, a crawl of 36 k pages spent 16-22 s after its last page."""
    budget = comps.settings.end_demotion_s if budget_s is None else budget_s
    deadline = time.monotonic() + budget
    total, limit = 0, END_FIRST_ROWS
    while time.monotonic() < deadline:
        started = time.monotonic()
        rows = (await demote_safe(comps, max_rounds=1, limit=limit)).rows
        total += rows
        if rows < limit:  # none left, another process demoting, or warm away
            break
        # Each round is sized to what the time left allows at the pace just measured, so
        # the last one does not run a whole 5,000-row round past the budget.
        now = time.monotonic()
        pace = rows / max(now - started, 1e-3)
        limit = int(min(5000, pace * (deadline - now) * 0.8))
        if limit < END_FIRST_ROWS // 4:
            break
    return total


async def evict_safe(comps: Components) -> None:
    """Hot eviction when Redis is over ``STRATACRAWL_HOT_BUDGET_MB``; never stops a crawl."""
    try:
        stats = await evict_hot(comps.redis, comps.pool,
                                budget_mb=comps.runtime.settings.hot_budget_mb)
        if stats.evicted:
            log.info("crawl: evicted %d hot URL states (%.0f → %.0f MB)", stats.evicted,
                     stats.used_before_mb, stats.used_after_mb)
    except Exception as e:  # hot is a cache: try again next round
        log.warning("crawl: hot eviction failed: %s", e)


SEED_CONCURRENCY = 128  # sources seeded at once (robots.txt + seeds: one host each)


async def seed(comps: Components, sources: SourcesFile) -> DiscoveryStats:
    """Seeds into the ledger, lists due again re-armed, sitemaps named in robots.txt queued
    (:func:`seed_tasks`, then :func:`seed_sitemaps`)."""
    stats = await seed_tasks(comps, sources)
    stats.merge(await seed_sitemaps(comps, sources))
    return stats


async def seed_tasks(comps: Components, sources: SourcesFile) -> DiscoveryStats:
    """The sources' seeds into the ledger (once) and their lists due again re-armed: no
    request, so a crawl can start fetching at once."""
    stats = DiscoveryStats()

    async def one(source: Source) -> None:
        stats.merge(await comps.discovery.seed(source))

    await _side_by_side(sources, one)
    return stats


async def seed_sitemaps(comps: Components, sources: SourcesFile,
                        on_queued: Callable[[str], None] | None = None) -> DiscoveryStats:
    """The sitemaps each source's robots.txt names, queued (``on_queued``: told the
    source's id when it queued some). Sources are read side by side: each one may wait on
    a slow robots.txt (a crawl runs this beside its fetching, so a slow one holds up no
    source's first page)."""
    stats = DiscoveryStats()

    async def one(source: Source) -> None:
        if source.sitemaps:
            sitemaps: list[NewTask] = []
            named: set[str] = set()

            async def turn() -> float:
                return await comps.politeness.wait_turn(source.id, source.rate)

            private_ok = source.allow_private_networks
            for seed_url in source.seeds:
                try:  # robots.txt and the sitemaps it names: the same checks as any fetch
                    named |= set((await comps.robots.check(seed_url, turn,
                                                     allow_private=private_ok)).sitemaps)
                except InvalidURL as e:
                    stats.dropped[e.reason] += 1
                except SourceHeld:  # Retry-After: its sitemaps wait for the next seeding
                    break
            for url in named:
                try:
                    canonical = canonicalize(url)
                    check_target(canonical, allow_private=private_ok)
                    if source.allow and not source.matches("allow", canonical):
                        raise InvalidURL(url, "out-of-scope")
                    sitemaps.append(NewTask(source.id, url, canonical_fingerprint(canonical),
                                            "sitemap", source.priority))
                except InvalidURL as e:
                    stats.dropped[e.reason] += 1
            queued = await comps.frontier.add(sitemaps)
            stats.queued += queued
            if queued and on_queued is not None:
                on_queued(source.id)

    await _side_by_side(sources, one)
    return stats


async def _side_by_side(sources: SourcesFile,
                        one: Callable[[Source], Awaitable[None]]) -> None:
    """``one`` for every source, ``SEED_CONCURRENCY`` sources at a time."""
    gate = asyncio.Semaphore(SEED_CONCURRENCY)

    async def gated(source: Source) -> None:
        async with gate:
            await one(source)

    await asyncio.gather(*(gated(s) for s in sources.sources))


async def discover_staged(comps: Components, sources: SourcesFile, limit: int = 200,
                          hops: LatencyHistogram | None = None) -> DiscoveryStats:
    """Links of staged seed/list/sitemap pages not yet discovered → frontier; marks them
    done. Most list pages never wait here: the fetch worker's list hop discovers them
    right after their fetch; these are the ones it could not (a tier away) and pages
    staged by other means. ``hops`` gets each page's time from fetch to frontier.

    Rows are claimed with SKIP LOCKED, so several discoverers can run; re-running after a
    crash re-discovers a page at most, and dedup makes that harmless.
    """
    stats = DiscoveryStats()
    grades: list[tuple[int, bool, float, float]] = []  # adaptive re-crawl of the list pages
    async with comps.pool.connection() as conn, conn.transaction():
        rows = await claim_undiscovered(conn, limit)
        for fetched_at, _id, source_id, url, final_url, ctype, body, task_id, codec in rows:
            if body is None or not sources.has(source_id):
                continue
            source = sources.get(source_id)
            page = await comps.discovery.discover_page(source, final_url or url,
                                                       decode_body(body, codec), ctype)
            stats.merge(page)
            if hops is not None:
                hops.add((datetime.now(UTC) - fetched_at).total_seconds() * 1000)
            if source.recrawl.adaptive:
                grades.append((task_id, page.news, source.min_interval_td.total_seconds(),
                               source.max_interval_td.total_seconds()))
        await mark_discovered(conn, rows)
    await comps.ledger.grade_lists(grades, SHRINK, GROW)
    return stats


async def mine_url_rules(comps: Components, sources: SourcesFile, *,
                         force: bool = False) -> None:
    """Learn each source's URL rules from what was fetched since the last pass."""
    for source in sources.sources:
        await comps.url_rules.learn(source, force=force)


async def drain_spool(comps: Components) -> DrainReport:
    return await drain(comps.spool, comps.pool)
