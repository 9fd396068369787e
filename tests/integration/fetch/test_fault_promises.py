"""Promises that must hold under faults: a restart under the same worker name leaves no
gap, a dead process's slots and leases come free within seconds, every fetch path passes
the private-network check, retried faults are counted, warm refills what it lost."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratacrawl.crawl import crawl
from stratacrawl.errors import InvalidURL
from stratacrawl.fetch.fetcher import Fetcher, SourceClient
from stratacrawl.fetch.politeness import SLOT_TTL_S
from stratacrawl.fetch.robots import RobotsCache, fetch_text
from stratacrawl.sim import Behaviour, SimulatorThread
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.tiers.demotion import demote
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.processes import tier_env
from tests.support.sites import small_site, sources_for, staged_items

pytestmark = pytest.mark.integration


async def _count(c: Components, sql: str, *args: object) -> int:
    async with c.pool.connection() as conn:
        row = await (await conn.execute(sql, args or None)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.slow
async def test_restart_under_the_same_worker_id_leaves_no_gap(comps: Components,
                                                              tmp_path: Path) -> None:
    """kill -9 a crawl holding leases, restart it under the same ``--worker-id``: the new
    run takes the dead run's leases over (its heartbeat went stale) and ``--until-idle``
    returns only when every published item is staged — once. It once returned at once
    with the dead run's leases still held (380 items never fetched, validation passed)."""
    specs = small_site(2, hosts(), backlog=60)
    with SimulatorThread(specs) as st:
        # Slow enough (2 requests/s a source) that the killed crawl outlasts a few staging
        # flushes (every 5 s): it dies holding item leases, with some items landed.
        doc = sources_document(specs, rate=2.0, concurrency=2)
        sources_file = tmp_path / "sources.yaml"
        sources_file.write_text(yaml.safe_dump(doc))
        proc = subprocess.Popen(
            [sys.executable, "-m", "stratacrawl", "crawl", "--sources", str(sources_file),
             "--worker-id", "w1"], env=tier_env(comps, tmp_path / "state"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 90
            held = 0
            while time.monotonic() < deadline and proc.poll() is None:
                held = await _count(comps, "SELECT count(*) FROM tasks WHERE state IN "
                                    "('LEASED', 'FETCHING') AND kind = 'item'")
                if held >= 2 and await _count(comps, "SELECT count(*) FROM staging "
                                              "WHERE kind = 'item'") >= 10:
                    break
                await asyncio.sleep(0.2)
            assert held >= 2, "the crawl should hold item leases before it is killed"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            killed_at = time.time()
        dead = await _count(comps, "SELECT count(*) FROM tasks WHERE state IN ('LEASED', "
                            "'FETCHING') AND lease_owner LIKE 'w1~%%'")
        assert dead > 0
        async with comps.pool.connection() as conn:
            dead_run = (await (await conn.execute(
                "SELECT lease_owner FROM tasks WHERE state IN ('LEASED', 'FETCHING') "
                "LIMIT 1")).fetchone())[0]
        t0 = time.monotonic()
        report = await crawl(comps, sources_for(specs, rate=8.0, concurrency=2),
                             worker_id="w1", until_idle=True, seconds=240, flush_s=0.3)
        took = time.monotonic() - t0
        assert report.seconds < 240, "until-idle ended by its deadline, not by idling"
        truth = st.sim.truth()
        staged = await staged_items(comps)
        for spec in specs:
            missing = {i["url"] for i in truth[spec.id]} - staged.get(spec.id, set())
            assert not missing, f"{spec.id}: {len(missing)} items never fetched"
        assert await _count(comps, "SELECT count(*) FROM tasks WHERE state IN "
                            "('LEASED', 'FETCHING')") == 0
        assert await _count(comps, "SELECT count(*) - count(DISTINCT task_id) FROM staging "
                            "WHERE kind = 'item' AND status = 200") == 0
        # The new run gave back every slot it took; the dead run's expire SLOT_TTL_S after
        # its last renewal instead of blocking its sources for 2 min. (Expired holders stay
        # in the set until the source's next acquire or renewal sweeps them.)
        for spec in specs:
            holders = await comps.redis.zrange(f"sc:{{{spec.id}}}:slots", 0, -1,
                                               withscores=True)
            for holder, expiry in holders:
                assert holder.decode().startswith(f"{dead_run}:"), holders
                assert expiry <= killed_at + SLOT_TTL_S + 1, holders
        print(f"restart: {dead} dead leases taken over; crawl took {took:.1f} s")


async def test_a_slot_nobody_renews_is_free_again(comps: Components) -> None:
    p = comps.politeness
    assert await p.acquire_slot("s1", "dead:1", 1, ttl_s=0.5)
    assert not await p.acquire_slot("s1", "live:1", 1, ttl_s=0.5)  # at its limit
    assert await p.renew_slots("s1", ["dead:1"], 1, ttl_s=0.5) == 1  # renewing keeps it
    await asyncio.sleep(0.7)
    assert await p.acquire_slot("s1", "live:1", 1, ttl_s=0.5)  # nobody renewed it: free


async def test_retry_after_holds_the_whole_source(comps: Components) -> None:
    p = comps.politeness
    factor = await p.throttle("s1", rate=10.0, concurrency=2, retry_after_s=30.0)
    assert factor == pytest.approx(0.5)
    # A burst of 429s answered at the old pace is one signal, not a collapse.
    assert await p.throttle("s1", rate=10.0, concurrency=2, retry_after_s=None) == \
        pytest.approx(0.5, abs=0.01)
    rates = await p.effective_rates({"s1": 10.0, "s2": 10.0})
    assert set(rates) == {"s1"} and rates["s1"][0] == pytest.approx(5.0, abs=0.1)
    assert rates["s1"][1] > 25
    from stratacrawl.fetch.politeness import SourceHeld
    with pytest.raises(SourceHeld):
        await p.wait_turn("s1", 10.0)
    assert await p.wait_turn("s2", 10.0) >= 0  # other sources are not held


async def test_private_sources_get_no_request_on_any_path(comps: Components) -> None:
    """A source that does not allow private networks, on a private host: its seeds,
    robots.txt (and the sitemaps robots.txt names), a task already in the ledger and an
    urgent submission all stop at the same check — the simulator sees no request. Its
    robots.txt and sitemap were once fetched and staged (status 200)."""
    specs = small_site(1, hosts(), backlog=10)
    with SimulatorThread(specs) as st:
        sources = sources_for(specs, allow_private_networks=False)
        source = sources.sources[0]
        report = await crawl(comps, sources, until_idle=True, seconds=30, flush_s=0.3)
        assert report.discovery.dropped["private-network"] >= 1
        # A task that reached the ledger another way (an older version, a sitemap):
        fetcher = Fetcher(politeness=comps.politeness,
                          robots=RobotsCache(redis=comps.redis))
        client = SourceClient(source)
        try:
            result = await fetcher.fetch(client, source, specs[0].base_url + "/sitemap.xml")
        finally:
            await client.aclose()
        assert result.verdict.reason == "private-network" and result.status is None
        submitted = await comps.discovery.submit(source, [specs[0].base_url + "/article/1"])
        assert submitted.queued == 0 and submitted.dropped["private-network"] == 1
        with pytest.raises(InvalidURL, match="private-network"):  # robots.txt, every hop
            await fetch_text(specs[0].base_url + "/robots.txt", allow_private=False)
        assert st.sim.servers[specs[0].id].stats()["counts"].get("requests", 0) == 0
    assert await _count(comps, "SELECT count(*) FROM staging") == 0


@pytest.mark.slow
async def test_retried_faults_are_counted_even_when_the_retry_succeeds(
        comps: Components) -> None:
    specs = small_site(1, hosts(), backlog=40, behaviour=Behaviour(reset_rate=0.1))
    with SimulatorThread(specs) as st:
        report = await crawl(comps, sources_for(specs), until_idle=True, seconds=120,
                             flush_s=0.3)
        resets = st.sim.servers[specs[0].id].stats()["counts"].get("resets", 0)
    out = report.to_json()
    assert resets > 0
    assert out["retries"].get("connection-reset", 0) > 0, out
    assert out["retries"]["connection-reset"] <= resets


async def _crawled_into_warm(comps: Components, specs: list[Any]) -> int:
    """The sites crawled and every fetched URL demoted to warm; how many cold marks synced."""
    with SimulatorThread(specs):
        await crawl(comps, sources_for(specs), until_idle=True, seconds=60, flush_s=0.3)
    await demote(comps.pool, comps.warm)
    return await _count(comps, "SELECT count(*) FROM url_state WHERE warm_synced_at "
                        "IS NOT NULL")


async def test_recovery_refills_a_partly_lost_warm_tier(comps: Components) -> None:
    """Warm wiped while the crawl went on (one URL indexed since): recovery compares
    warm with cold's synced rows per weekly index and re-indexes what is missing. It
    once saw "warm holds 1 document" and left it at 1 of thousands."""
    synced = await _crawled_into_warm(comps, small_site(1, hosts(), backlog=30))
    layout = comps.runtime.layout
    assert synced > 20
    index = f"{layout.alias('url_dedup')}-*"
    await comps.warm.es.indices.refresh(index=index)
    assert (await comps.warm.es.count(index=index))["count"] == synced
    await comps.warm.es.indices.delete(index=f"{layout.prefix}url_*")  # warm lost...
    async with comps.pool.connection() as conn:  # ...and one URL crawled since
        await conn.execute("WITH u AS (UPDATE url_state SET last_crawled = now() WHERE url_hash = "
                           "(SELECT url_hash FROM url_state WHERE warm_synced_at IS NOT NULL "
                           "LIMIT 1) RETURNING url_hash) "
                           "INSERT INTO warm_outbox (url_hashes) SELECT array_agg(url_hash) FROM u")
    await demote(comps.pool, comps.warm)
    await comps.warm.es.indices.refresh(index=index)
    assert (await comps.warm.es.count(index=index))["count"] == 1
    report = await comps.recovery().run()
    step = next(s for s in report.steps if s.name.startswith("re-index warm"))
    assert step.result.startswith("re-indexed"), step.result
    await comps.warm.es.indices.refresh(index=index)
    assert (await comps.warm.es.count(index=index))["count"] == synced
    step = next(s for s in (await comps.recovery().run()).steps if s.name.startswith("re-index warm"))
    assert "as cold expects" in step.result  # nothing more to do


async def _synced_in_cold_only(comps: Components, n: int) -> None:
    """``n`` URLs cold says warm holds, while warm is empty."""
    async with comps.pool.connection() as conn:
        await conn.execute(
            "INSERT INTO url_state (url_hash, source_id, url, last_crawled, http_status, "
            "warm_synced_at) SELECT md5(i::text)::uuid, 's1', 'http://s1.test/p/' || i, now(), 200, "
            "now() FROM generate_series(1, %s) AS i", (n,))


async def test_a_large_refill_is_bounded_and_finished_by_demotion(
        comps: Components, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery re-indexes a bounded share of a lost warm tier itself (at 10 M URLs an
    unbounded refill held the recovery for a quarter of an hour and grew the ES-API
    server to 11 GB); the rest waits in the warm outbox, and the demotion finishes it."""
    from stratacrawl.tiers import recovery as recovery_module

    monkeypatch.setattr(recovery_module, "REFILL_BATCH", 1000)
    monkeypatch.setattr(recovery_module, "REFILL_NOW_ROUNDS", 1)
    n = 2500
    await _synced_in_cold_only(comps, n)
    step = next(s for s in (await comps.recovery().run()).steps
                if s.name.startswith("re-index warm"))
    assert step.result.startswith(f"re-indexed 1000 of {n} URLs"), step.result
    assert "the other ~1500 wait in the warm outbox" in step.result, step.result
    index = f"{comps.runtime.layout.alias('url_dedup')}-*"
    await comps.warm.es.indices.refresh(index=index)
    assert (await comps.warm.es.count(index=index))["count"] == 1000
    await demote(comps.pool, comps.warm)   # the demotion deployment's run
    await comps.warm.es.indices.refresh(index=index)
    assert (await comps.warm.es.count(index=index))["count"] == n
    step = next(s for s in (await comps.recovery().run()).steps
                if s.name.startswith("re-index warm"))
    assert "as cold expects" in step.result, step.result


async def test_recovery_refills_url_meta_lost_alone(comps: Components) -> None:
    """``url_meta`` lost with ``url_dedup`` intact: recovery counted only url_dedup and
    never refilled the page metadata (``lookup`` then answered from cold)."""
    synced = await _crawled_into_warm(comps, small_site(1, hosts(), backlog=20))
    layout = comps.runtime.layout
    meta, dedup = f"{layout.alias('url_meta')}-*", f"{layout.alias('url_dedup')}-*"
    await comps.warm.es.indices.refresh(index=meta)
    assert synced > 10 and (await comps.warm.es.count(index=meta))["count"] == synced
    await comps.warm.es.indices.delete(index=meta)          # one family lost
    step = next(s for s in (await comps.recovery().run()).steps
                if s.name.startswith("re-index warm"))
    assert step.result.startswith("re-indexed") and "url_meta short" in step.result, step.result
    assert "url_dedup short" not in step.result
    for index in (meta, dedup):
        await comps.warm.es.indices.refresh(index=index)
        assert (await comps.warm.es.count(index=index))["count"] == synced, index


async def test_a_re_index_cut_short_is_finished_by_the_next_recovery(
        comps: Components, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recovery whose re-index stopped after one batch (kill -9 or SIGTERM mid-way, as
    the bound does here): the next recovery finishes it from the warm outbox. It once
    said "as cold expects" — warm held what cold still counted as synced — and stopped."""
    from stratacrawl.tiers import recovery as recovery_module

    monkeypatch.setattr(recovery_module, "REFILL_BATCH", 1000)
    monkeypatch.setattr(recovery_module, "REFILL_NOW_ROUNDS", 1)
    n = 2200
    await _synced_in_cold_only(comps, n)
    index = f"{comps.runtime.layout.alias('url_dedup')}-*"
    results = []
    for _ in range(3):
        step = next(s for s in (await comps.recovery().run()).steps
                    if s.name.startswith("re-index warm"))
        results.append(step.result)
    assert results[0].startswith(f"re-indexed 1000 of {n} URLs"), results
    assert "indexed 1000 of the 1200 URLs waiting in the warm outbox" in results[1], results
    assert "indexed 200 of the 200 URLs" in results[2], results
    await comps.warm.es.indices.refresh(index=index)
    assert (await comps.warm.es.count(index=index))["count"] == n
    step = next(s for s in (await comps.recovery().run()).steps
                if s.name.startswith("re-index warm"))
    assert "as cold expects" in step.result, step.result
