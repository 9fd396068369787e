"""Recovery after Redis loses everything, and kill -9 of flow processes at random points."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stratacrawl.crawl import crawl
from stratacrawl.frontier.dedup import Seen
from stratacrawl.hot.queue import ready_key
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.processes import tier_env
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


async def assert_nothing_lost(c: Components, truth: dict[str, list[dict[str, object]]]) -> None:
    """Every item staged and one record each; ledger and staging agree."""
    async with c.pool.connection() as conn:
        missing = []
        for source_id, items in truth.items():
            urls = [str(it["url"]) for it in items]
            cur = await conn.execute(
                "SELECT canonical_url, count(*) FROM records WHERE source_id = %s GROUP BY 1",
                (source_id,))
            per_url = dict(await cur.fetchall())
            missing += [u for u in urls if per_url.get(u) != 1]
        assert missing == [], f"{len(missing)} items without exactly one record: {missing[:5]}"
        orphans = await (await conn.execute(
            "SELECT count(*) FROM tasks t WHERE t.state = 'SUCCEEDED' AND NOT EXISTS "
            "(SELECT 1 FROM staging s WHERE s.task_id = t.id)")).fetchone()
        dup = await (await conn.execute(
            "SELECT count(*) - count(DISTINCT fetch_key) FROM staging")).fetchone()
        stuck = await (await conn.execute(
            "SELECT count(*) FROM tasks WHERE state IN ('LEASED', 'FETCHING')")).fetchone()
        keys = await (await conn.execute(
            "SELECT (SELECT count(*) FROM records) - (SELECT count(*) FROM record_items)")).fetchone()
    assert orphans == (0,) and dup == (0,) and stuck == (0,) and keys == (0,)


@pytest.mark.slow
async def test_redis_flushed_mid_crawl_recovery_rebuilds_and_loses_nothing(
        comps: Components) -> None:
    specs = small_site(2, hosts(), backlog=100)
    with SimulatorThread(specs) as st:
        # 3 s at 8 requests/s (the batches claimed by then run on at that pace for a few
        # seconds more): ~60 of each source's ~110 pages. A site small enough to finish in
        # that time leaves no ready task to rebuild.
        sources = sources_for(specs, rate=8.0)
        await crawl(comps, sources, until_idle=False, seconds=3, flush_s=0.3)
        async with comps.pool.connection() as conn:
            known = [r[0] for r in await (await conn.execute(
                "SELECT url FROM url_state WHERE last_crawled IS NOT NULL LIMIT 20")).fetchall()]
            pending = (await (await conn.execute(
                "SELECT count(*) FROM tasks WHERE state IN ('PENDING', 'RETRY_WAIT') "
                "AND due_at <= now()")).fetchone())[0]
        assert known and pending > 0, "the crawl should be half done"
        await comps.redis.flushdb()                       # Redis loses everything
        assert not await comps.bloom.is_ready()
        comps.dedup.cache_ttl_s = 0
        # an empty Bloom filter says "new": dedup must not believe it until rebuilt
        verdicts = await comps.dedup.check([fingerprint(u) for u in known])
        assert Seen.NEW not in verdicts

        report = await comps.recovery().run()
        names = [s.name for s in report.steps]
        assert names == ["reclaim expired leases", "re-queue tasks failed by a tier outage",
                         "rebuild hot ready queues", "restore sessions", "drain spool",
                         "rebuild Bloom filter", "re-index warm where short of cold"]
        assert await comps.bloom.is_ready()
        assert sum([await comps.redis.zcard(ready_key(s.id)) for s in sources.sources]) > 0
        assert await comps.bloom.contains([fingerprint(u) for u in known]) == [True] * len(known)
        assert (await comps.recovery().run()).steps[5].result == "already complete"  # idempotent

        await crawl(comps, sources_for(specs, rate=100.0), until_idle=True, seconds=120,
                    flush_s=0.3)
        await comps.cleaner(sources).run()
        await assert_nothing_lost(comps, st.sim.truth())


@pytest.mark.slow
async def test_kill_9_at_random_points_twenty_times(comps: Components, tmp_path: Path) -> None:
    """Bounded version of the fault soak: crawl and clean processes killed at random."""
    rng = random.Random(20261130)
    specs = small_site(2, hosts(), backlog=50)
    with SimulatorThread(specs) as st:
        doc = sources_document(specs, rate=6.0, concurrency=2)
        sources_file = tmp_path / "sources.yaml"
        sources_file.write_text(yaml.safe_dump(doc))
        env = tier_env(comps, tmp_path / "state")
        kills = 0
        for i in range(20):
            # Crawls restart under one worker name half the time (a supervisor restarting
            # "w1"), under a new random one otherwise.
            command = ["clean"] if i % 4 == 3 else (
                ["crawl", "--worker-id", "w1"] if i % 2 else ["crawl"])
            proc = subprocess.Popen([sys.executable, "-m", "stratacrawl", *command, "--sources",
                                     str(sources_file)], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            await asyncio.sleep(rng.uniform(1.5, 4.0))   # imports take ~1.5 s: kill mid-work
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
            proc.wait(10)
            if i % 5 == 4:  # sometimes Redis goes too
                await comps.redis.flushdb()
            # No lease runs out here: the dead runs' leases must come back because their
            # heartbeats stopped (recovery, or the final crawl's reclaim, takes them).
            await comps.recovery().run()
        assert kills >= 15
        sources = sources_for(specs, rate=100.0)
        await crawl(comps, sources, until_idle=True, seconds=180, flush_s=0.3)
        await comps.cleaner(sources).run()
        await assert_nothing_lost(comps, st.sim.truth())
        assert not list((tmp_path / "state" / "spool").glob("*.batch"))


async def test_tasks_failed_by_a_tier_outage_are_queued_again(comps: Components) -> None:
    """Installations that ran an older version have tasks FAILED with the driver's error
    name after one attempt (``ConnectionError``: Redis restarted mid-crawl). Compensation
    and recovery queue them again; a page's own failure stays FAILED."""
    from datetime import timedelta

    from stratacrawl.cold.tasks import NewTask
    from stratacrawl.tiers.compensation import compensate

    await comps.frontier.add([NewTask("s", f"http://h/{i}", f"{i:032x}") for i in range(3)])
    async with comps.pool.connection() as conn:
        await conn.execute(
            "UPDATE tasks SET state = 'FAILED', attempts = 1, finished_at = now(), "
            "last_error = CASE url WHEN 'http://h/0' THEN 'ConnectionError' "
            "WHEN 'http://h/1' THEN 'tier-unavailable' ELSE 'http-404' END")
    report = await compensate(comps.frontier, overdue_after=timedelta(hours=6))
    assert report["s"].requeued == 2
    async with comps.pool.connection() as conn:
        rows = dict(await (await conn.execute(
            "SELECT url, state || ':' || attempts FROM tasks")).fetchall())
    assert rows == {"http://h/0": "PENDING:0", "http://h/1": "PENDING:0",
                    "http://h/2": "FAILED:1"}
    step = (await comps.recovery().run()).steps[1]
    assert step.name == "re-queue tasks failed by a tier outage" and step.result == "0 tasks"
