"""Faults: PostgreSQL stopped mid-crawl, the Elasticsearch API killed mid-crawl, and kill -9
of the crawl process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratacrawl.cold.db import ensure_database
from stratacrawl.crawl import CrawlReport, crawl
from stratacrawl.services import Endpoints
from stratacrawl.services.embedded import EmbeddedPostgres, free_port
from stratacrawl.settings import Settings
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.tiers.demotion import demote
from stratacrawl.wiring import Components, Runtime, open_components
from tests.support.hosts import hosts
from tests.support.processes import tier_env
from tests.support.sites import small_site, sources_for, staged_items, task_states

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def _staged_count(c: Components) -> int:
    async with c.pool.connection() as conn:
        row = await (await conn.execute("SELECT count(*) FROM staging")).fetchone()
    return int(row[0]) if row else 0


async def _synced_count(c: Components) -> int:
    async with c.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT count(*) FROM url_state WHERE warm_synced_at IS NOT NULL")).fetchone()
    return int(row[0]) if row else 0


async def _assert_consistent(c: Components, truth: dict[str, list[dict[str, object]]]) -> None:
    staged = await staged_items(c)
    for source_id, items in truth.items():
        assert {it["url"] for it in items} <= staged.get(source_id, set()), source_id
    async with c.pool.connection() as conn:
        dup = await (await conn.execute(
            "SELECT count(*) - count(DISTINCT fetch_key) FROM staging")).fetchone()
    assert dup == (0,)
    states = {s for s, _ in (await task_states(c)).values()}
    assert states <= {"SUCCEEDED", "FAILED", "PENDING", "RETRY_WAIT", "REDUNDANT"}


@contextlib.asynccontextmanager
async def _through_a_postgres_outage(settings: Settings, tmp_path: Path
                                     ) -> AsyncIterator[tuple[CrawlReport, Components, Any]]:
    """A crawl of a small site on an embedded PostgreSQL that stops for 12 s mid-crawl and
    comes back: yields (the crawl's report, its components, the simulator's truth)."""
    pg = EmbeddedPostgres(tmp_path / "pgstate")
    running, _ = pg.ensure()
    try:
        db_url = ensure_database(running.url, "stratacrawl")
        s = settings.model_copy(update={"database_url": db_url, "state_dir": tmp_path / "state"})
        rt = Runtime(s, Endpoints(s.redis_url or "", s.elasticsearch_url or "", db_url,
                                  frozenset({"elasticsearch"})))
        await rt.prepare()
        specs = small_site(2, hosts(), backlog=60)
        with SimulatorThread(specs) as st:
            # ~15 s of crawling: PostgreSQL must go away while there is work left.
            sources = sources_for(specs, rate=6.0)
            async with open_components(rt) as c:
                run = asyncio.create_task(crawl(c, sources, until_idle=True, seconds=180,
                                                flush_rows=10, flush_s=0.3))
                deadline = time.monotonic() + 60
                while await _staged_count(c) < 20 and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                await asyncio.to_thread(pg.stop)          # PostgreSQL goes away mid-crawl
                await asyncio.sleep(12)                   # longer than the pool waits
                await asyncio.to_thread(pg.ensure)        # and comes back
                yield await run, c, st.sim.truth()
    finally:
        pg.stop()


async def test_postgres_outage_mid_crawl_loses_nothing(settings: Settings, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL stops for 12 s mid-crawl: the rows a flush could not land go to the spool
    and back, the crawl pauses its claims until PostgreSQL answers; nothing is lost."""
    caplog.set_level(logging.WARNING, logger="stratacrawl.fetch.outage")
    async with _through_a_postgres_outage(settings, tmp_path) as (report, c, truth):
        # The crawl saw the outage: rows spooled (a flush failed) or claims paused
        # (either or both, by when in a batch PostgreSQL went away).
        paused = any("claims paused" in r.getMessage() for r in caplog.records)
        assert report.writer is not None and (report.writer.spooled > 0 or paused)
        assert not list((tmp_path / "state" / "spool").glob("*.batch"))
        await _assert_consistent(c, truth)


async def test_kill_9_mid_batch_then_restart_loses_nothing(comps: Components,
                                                           tmp_path: Path) -> None:
    specs = small_site(2, hosts(), backlog=60)
    with SimulatorThread(specs) as st:
        sources_file = tmp_path / "sources.yaml"
        doc = sources_document(specs, rate=4.0, concurrency=2)  # ~15 s of crawling
        sources_file.write_text(yaml.safe_dump(doc))
        env = tier_env(comps, tmp_path / "state")
        proc = subprocess.Popen([sys.executable, "-m", "stratacrawl", "crawl", "--sources",
                                 str(sources_file)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # Kill once some work has landed and batches are visibly in flight.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            async with comps.pool.connection() as conn:
                leased, done = await (await conn.execute(
                    "SELECT count(*) FILTER (WHERE state IN ('LEASED', 'FETCHING')), "
                    "count(*) FILTER (WHERE state = 'SUCCEEDED') FROM tasks")).fetchone()
            if leased > 0 and done >= 10:
                break
            await asyncio.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)                 # mid-batch, no goodbye
        proc.wait(10)
        async with comps.pool.connection() as conn:
            leased = await (await conn.execute(
                "SELECT count(*) FROM tasks WHERE state IN ('LEASED', 'FETCHING')")).fetchone()
            # The lease time passes (instead of waiting out 5 minutes).
            await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s' "
                               "WHERE state IN ('LEASED', 'FETCHING')")
        assert leased[0] > 0, "the kill should have caught batches in flight"
        assert await comps.frontier.reclaim() == leased[0]
        await crawl(comps, sources_for(specs, rate=50.0), until_idle=True, seconds=180,
                    flush_s=0.3)
        await _assert_consistent(comps, st.sim.truth())


def _start_es_api(port: int, log: Path) -> subprocess.Popen[bytes]:
    """The Elasticsearch-API server on a fixed port (so a restart answers at the same URL)."""
    from osmem_server import resolve_binary

    out = open(log, "ab")
    proc = subprocess.Popen([resolve_binary(), "--addr", f"127.0.0.1:{port}",
                             "--no-stdin-watch", "--no-ja"], stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the Elasticsearch API did not start; see {log}")


async def test_elasticsearch_killed_mid_crawl_then_back_empty(settings: Settings,
                                                              tmp_path: Path) -> None:
    """kill -9 of the Elasticsearch API mid-crawl: the crawl goes on (dedup from hot and
    cold), nothing is lost or staged twice; it comes back empty, and recovery re-indexes
    warm from cold until it holds what cold says it should."""
    port = free_port()
    es = _start_es_api(port, tmp_path / "es.log")
    try:
        s = settings.model_copy(update={"elasticsearch_url": f"http://127.0.0.1:{port}",
                                        "es_plain_json": True, "demote_every_s": 0.5})
        rt = Runtime(s, Endpoints(s.redis_url or "", s.elasticsearch_url or "",
                                  s.database_url or "", frozenset()))
        await rt.prepare()
        specs = small_site(2, hosts(), backlog=60)
        with SimulatorThread(specs) as st:
            async with open_components(rt) as c:
                run = asyncio.create_task(crawl(c, sources_for(specs, rate=15.0),
                                                until_idle=True, seconds=180, flush_s=0.3))
                deadline = time.monotonic() + 60
                while (await _staged_count(c) < 20 or not await _synced_count(c)) and \
                        time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                assert await _synced_count(c) > 0, "some fetches should be in warm by now"
                es.kill()                                  # warm goes away mid-crawl
                es.wait(10)
                report = await run
                assert report.fetched > 20
                await _assert_consistent(c, st.sim.truth())
                es = _start_es_api(port, tmp_path / "es.log")  # back, and empty
                await rt.prepare()
                # What warm held before the kill is re-indexed by recovery; what was
                # never demoted (warm was away) is backfilled by demotion from the watermark.
                step = next(x for x in (await c.recovery().run()).steps
                            if x.name.startswith("re-index warm"))
                assert step.result.startswith("re-indexed"), step.result
                await demote(c.pool, c.warm)
                index = f"{rt.layout.alias('url_dedup')}-*"
                await c.warm.es.indices.refresh(index=index)
                async with c.pool.connection() as conn:
                    synced = (await (await conn.execute(
                        "SELECT count(*) FROM url_state WHERE warm_synced_at IS NOT NULL"
                    )).fetchone())[0]
                    unsynced = (await (await conn.execute(
                        "SELECT count(*) FROM url_state WHERE last_crawled IS NOT NULL AND "
                        "warm_synced_at IS NULL")).fetchone())[0]
                assert unsynced == 0 and synced > 20
                assert (await c.warm.es.count(index=index))["count"] == synced
    finally:
        es.kill()
        es.wait(10)


async def test_postgres_outage_with_the_spool_disk_full_loses_nothing(
        settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The same outage with the spool's disk full (a small tmpfs, filled): the crawl
    pauses as for any outage — no crash, no traceback, no `.tmp` left — holds what it
    fetched in memory, and when PostgreSQL is back lands it; nothing is lost."""
    from tests.support.processes import fill, small_disk

    caplog.set_level(logging.WARNING)
    spool = tmp_path / "state" / "spool"
    with small_disk(spool, 64) as mounted:
        if not mounted:
            pytest.skip("this machine does not allow mounting a tmpfs")
        fill(spool)
        async with _through_a_postgres_outage(settings, tmp_path) as (report, c, truth):
            assert report.writer is not None and report.writer.spooled == 0
            assert report.writer.unstaged_at_close == 0
            said = [r.getMessage() for r in caplog.records]
            # (whether a flush met the outage depends on when in a batch it came)
            assert report.writer.held == 0 or any(
                "spool cannot be written" in m for m in said), said
            assert not [r for r in caplog.records if r.exc_info], said
            assert not list(spool.glob("*.tmp")) and not list(spool.glob("*.batch"))
            await _assert_consistent(c, truth)
