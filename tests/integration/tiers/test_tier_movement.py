"""Demotion, lookups across tiers, sinking, hot eviction, staging retention, compensation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.crawl import crawl, demote_at_end
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.tiers.compensation import compensate
from stratacrawl.tiers.demotion import demote
from stratacrawl.tiers.eviction import evict_hot, used_mb
from stratacrawl.tiers.lookup import lookup
from stratacrawl.tiers.sinking import expire_staging, sink
from stratacrawl.urls import fingerprint
from stratacrawl.warm.client import make_client
from stratacrawl.warm.store import WarmStore
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


@pytest.fixture
def site() -> Iterator[tuple[SimulatorThread, list[SourceSpec]]]:
    specs = small_site(2, hosts(), backlog=30)
    with SimulatorThread(specs) as st:
        yield st, specs


async def warm_count(c: Components, family: str) -> int:
    pattern = f"{c.runtime.layout.alias(family)}-*"
    await c.warm.es.indices.refresh(index=pattern, ignore_unavailable=True)
    return int((await c.warm.es.count(index=pattern, ignore_unavailable=True,
                                 allow_no_indices=True))["count"])


async def test_a_crawl_demotes_at_its_end_only_within_its_budget(comps: Components,
                                                               site) -> None:
    """Past the budget what is left stays unsynced in cold for the demotion deployment."""
    _, specs = site
    comps.settings.end_demotion_s = 0.0
    report = await crawl(comps, sources_for(specs), until_idle=True, seconds=120,
                         flush_s=0.3)
    assert report.fetched > 0 and report.demoted == 0
    assert await warm_count(comps, "url_dedup") == 0
    assert await demote_at_end(comps, budget_s=60) > 0   # a batch at a time, until none is left
    assert await demote_at_end(comps, budget_s=60) == 0
    async with comps.pool.connection() as conn:
        crawled = (await (await conn.execute(
            "SELECT count(*) FROM url_state WHERE last_crawled IS NOT NULL")).fetchone())[0]
    assert await warm_count(comps, "url_dedup") == crawled > 0


async def test_crawl_demotes_and_lookups_stay_the_same_after_sinking(comps: Components,
                                                                      site) -> None:
    st, specs = site
    report = await crawl(comps, sources_for(specs), until_idle=True, seconds=120, flush_s=0.3)
    async with comps.pool.connection() as conn:
        crawled = (await (await conn.execute(
            "SELECT count(*) FROM url_state WHERE last_crawled IS NOT NULL")).fetchone())[0]
    assert report.demoted == crawled > 0
    assert await warm_count(comps, "url_dedup") == crawled == await warm_count(comps, "url_meta")

    urls = [it["url"] for items in st.sim.truth().values() for it in items][:10]
    args = {"hot": comps.hot_urls, "warm": comps.warm,
            "pool": comps.pool}
    before = [await lookup(u, **args) for u in urls]
    assert all(f is not None and f.tier == "warm" and f.last_crawled for f in before)

    # One URL was used after the others; 40 days later only it stays warm.
    later = datetime.now(UTC) + timedelta(days=40)
    keep = fingerprint(urls[0])
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE url_state SET last_access = %s WHERE url_hash = %s",
                           (later - timedelta(days=5), keep))
    result = await sink(redis=comps.redis, warm=comps.warm, pool=comps.pool, ledger=comps.ledger,
                        warm_retention=timedelta(days=30),
                        staging_days=7, snapshot_sources=[], now=later)
    assert result.warm_refreshed == 2 and result.warm_deleted == 2 * (crawled - 1)
    async with comps.pool.connection() as conn:   # finished items left the ledger
        left = dict(await (await conn.execute(
            "SELECT kind, count(*) FROM tasks GROUP BY kind")).fetchall())
    assert result.tasks_retired > 0 and "item" not in left and left.get("list", 0) > 0
    assert await warm_count(comps, "url_dedup") == 1
    assert len(result.indices_created) == 6  # both families, this week and two ahead
    after = [await lookup(u, **args) for u in urls]
    assert [a.tier for a in after if a] == ["warm"] + ["cold"] * 9
    assert [a.same_facts() for a in after if a] == [b.same_facts() for b in before if b]


async def test_warm_down_the_crawl_goes_on_and_warm_is_backfilled(comps: Components,
                                                                   site) -> None:
    _, specs = site
    real = comps.warm
    comps.warm = comps.dedup.warm = WarmStore(
        es=make_client("http://127.0.0.1:1", plain_json=True, request_timeout=1, max_retries=0),
        layout=real.layout)
    try:
        report = await crawl(comps, sources_for(specs), until_idle=True, seconds=120,
                             flush_s=0.3)
    finally:
        await comps.warm.close()
        comps.warm = comps.dedup.warm = real
    assert report.fetched > 0 and report.demoted == 0
    async with comps.pool.connection() as conn:
        behind = (await (await conn.execute(
            "SELECT count(*) FROM url_state WHERE last_crawled IS NOT NULL "
            "AND warm_synced_at IS NULL")).fetchone())[0]
    assert behind > 0
    # Two workers demoting at once: one indexes, the other leaves it (no double work).
    first, second = await asyncio.gather(*(demote(comps.pool, comps.warm)
                                           for _ in range(2)))
    assert sorted([first.busy, second.busy]) == [False, True]
    stats = first if not first.busy else second
    assert stats.rows == behind and stats.error is None and stats.docs == 2 * behind
    assert await warm_count(comps, "url_dedup") == behind
    again = await demote(comps.pool, comps.warm)  # the lock was let go
    assert not again.busy and again.rows == 0


async def test_hot_url_state_records_hits_and_fields_across_script_calls(
        comps: Components) -> None:
    """One script call per CALL_KEYS URLs: re-references and writes in any mix, across
    chunk boundaries, with ``None`` fields left as they were."""
    from stratacrawl.hot.url_state import CALL_KEYS

    n = CALL_KEYS + 300
    fps = [f"{i:032x}" for i in range(n)]
    await comps.hot_urls.put_many({fp: {"lc": 100.0 + i, "et": f"e{i}", "st": 200}
                                   for i, fp in enumerate(fps)})
    touched = fps[::2]                        # every other one re-referenced...
    rewritten = {fp: {"st": 304, "et": None, "ch": "c"} for fp in fps[CALL_KEYS - 5:]}
    await comps.hot_urls.record(touched, rewritten, now=5000.0)  # ...and a tail rewritten
    got = await comps.hot_urls.get_many(fps)
    for i, (fp, e) in enumerate(zip(fps, got, strict=True)):
        assert e is not None and e.last_crawled == 100.0 + i and e.etag == f"e{i}", (i, e)
        assert (e.hits, e.last_access) == ((1, 5000.0) if i % 2 == 0 else (0, 0.0)), (i, e)
        tail = fp in rewritten
        assert (e.status, e.content_hash) == ((304, "c") if tail else (200, None)), (i, e)


async def test_hot_eviction_keeps_the_hot_and_writes_back(comps: Components) -> None:
    now = time.time()
    fps = [f"{i:032x}" for i in range(4000)]
    async with comps.pool.connection() as conn:
        await conn.execute("INSERT INTO url_state (url_hash, source_id, url, last_access) "
                           "SELECT unnest(%s::uuid[]), 's', 'http://h/', now() - interval '2 days'",
                           (fps,))
    # the first 100 are used often and lately; the rest once, a day ago
    entries = {fp: {"h": 50 if i < 100 else 1, "la": now if i < 100 else now - 86400,
                    "lc": now - 3600, "et": "x" * 200} for i, fp in enumerate(fps)}
    await comps.hot_urls.put_many(entries)
    used = await used_mb(comps.redis)
    stats = await evict_hot(comps.redis, comps.pool, budget_mb=used - 0.5, sample=1000)
    assert stats.evicted > 0 and stats.used_after_mb <= used - 0.5
    left = await comps.hot_urls.get_many(fps[:100])
    assert all(e is not None for e in left)
    gone = [fp for fp, e in zip(fps[100:], await comps.hot_urls.get_many(fps[100:]), strict=True)
            if e is None]
    assert len(gone) == stats.evicted
    async with comps.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT min(hits), max(hits), min(last_access) FROM url_state "
            "WHERE url_hash = ANY(%s)", (gone,))).fetchone()
    assert row[:2] == (1, 1)  # the evicted were the once-used, and their hits reached cold
    assert abs(row[2].timestamp() - (now - 86400)) < 1  # and their last access too


async def test_staging_retention_keeps_snapshots(comps: Components) -> None:
    old = (datetime.now(UTC) - timedelta(days=10)).replace(hour=12)
    async with comps.pool.connection() as conn:
        await conn.execute("SELECT sc_ensure_day_partition('staging', %s)", (old.date(),))
        await conn.execute("SELECT sc_ensure_day_partition('staging', %s)",
                           (datetime.now(UTC).date(),))
        for i, source in enumerate(("keep", "drop", "keep")):
            await conn.execute("INSERT INTO staging (fetched_at, fetch_key, source_id, url, status)"
                               " VALUES (%s, %s, %s, 'http://h/', 200)", (old, f"k{i}", source))
    dropped, copied = await expire_staging(comps.pool, keep_days=7, snapshot_sources=["keep"],
                                           today=datetime.now(UTC).date())
    assert dropped == [f"staging_{old:%Y%m%d}"] and copied == 2
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute("SELECT source_id FROM page_snapshots")).fetchall()
        parts = await (await conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'staging'::regclass")).fetchone()
    assert rows == [("keep",), ("keep",)] and parts == (1,)


async def test_compensation_reschedules_overdue_and_releases_parked(comps: Components) -> None:
    h1, h2, h3, h4 = (f"{i:032x}" for i in range(1, 5))
    async with comps.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO tasks (source_id, url, url_hash, state, due_at, priority) VALUES "
            f"('a', 'http://a/1', '{h1}', 'PENDING', now() - interval '10 hours', 5), "
            f"('a', 'http://a/2', '{h2}', 'RETRY_WAIT', now() + interval '3 days', 5), "
            f"('a', 'http://a/3', '{h3}', 'PENDING', now(), 5), "
            f"('b', 'http://b/1', '{h4}', 'LEASED', now(), 5)")
        await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 minute' "
                           "WHERE url_hash = %s", (h4,))
    report = await compensate(comps.frontier, overdue_after=timedelta(hours=6))
    assert (report["a"].rescheduled, report["a"].released, report["b"].reclaimed) == (1, 1, 1)
    async with comps.pool.connection() as conn:
        rows = dict(await (await conn.execute(
            "SELECT url_hash, (priority, due_at <= now(), state) FROM tasks")).fetchall())
    assert rows[h1] == ("6", "t", "PENDING") and rows[h2] == ("5", "t", "RETRY_WAIT")
    assert rows[h4] == ("5", "t", "PENDING")
    assert sum(report["a"].unfinished.values()) == 3


async def test_demotion_consumes_whole_outbox_entries(comps: Components) -> None:
    """A staging flush queues one outbox entry per source holding all its URLs. A
    demotion batch takes whole entries until it holds ``limit`` URLs (one entry may be
    bigger than the limit), so a small limit still drains the outbox and no URL of an
    entry is left behind."""
    from stratacrawl.cold.url_state import unsynced

    hashes = [fingerprint(f"http://a.test/{i}") for i in range(12)]
    async with comps.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO url_state (url_hash, source_id, url, http_status, last_crawled) "
            "SELECT h, 'a', 'http://a.test/' || n, 200, now() FROM unnest(%s::uuid[]) "
            "WITH ORDINALITY AS x(h, n)", (hashes,))
        for entry in (hashes[:5], hashes[5:6], hashes[6:]):
            await conn.execute("INSERT INTO warm_outbox (source_id, url_hashes) "
                               "VALUES ('a', %s::uuid[])", (entry,))
    first = await unsynced(comps.pool, 3)
    assert [e[1] for e in first] == hashes[:5] and len({e[0] for e in first}) == 1
    assert [e[1] for e in await unsynced(comps.pool, 6)] == hashes[:6]
    assert [e[1] for e in await unsynced(comps.pool, 7)] == hashes
    stats = await demote(comps.pool, comps.warm, limit=3)
    assert stats.rows == 12 and stats.error is None
    assert await unsynced(comps.pool, 100) == []
    assert await warm_count(comps, "url_dedup") == 12
