"""Promises across transitions: a tier that restarts mid-crawl, a SIGTERM, a server that
trickles bytes. Each crawl here is a ``stratacrawl crawl`` process, as an operator runs it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stratacrawl.services.embedded import free_port, spawn_redis
from stratacrawl.sim import Behaviour, SimulatorThread
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.processes import tier_env
from tests.support.sites import small_site, staged_items

pytestmark = pytest.mark.integration


async def _count(c: Components, sql: str, *args: object) -> int:
    async with c.pool.connection() as conn:
        row = await (await conn.execute(sql, args or None)).fetchone()
    return int(row[0]) if row else 0


async def _wait_for(c: Components, sql: str, at_least: int, proc: subprocess.Popen[bytes],
                    timeout: float = 90) -> int:
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline and proc.poll() is None:
        n = await _count(c, sql)
        if n >= at_least:
            return n
        await asyncio.sleep(0.1)
    return n


def _crawl(sources_file: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "stratacrawl", "crawl", "--sources", str(sources_file), *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def _every_item_staged_once(comps: Components, st: SimulatorThread) -> None:
    truth = st.sim.truth()
    staged = await staged_items(comps)
    for sid, items in truth.items():
        missing = {i["url"] for i in items} - staged.get(sid, set())
        assert not missing, f"{sid}: {len(missing)} items never staged"
    assert await _count(comps, "SELECT count(*) - count(DISTINCT task_id) FROM staging "
                        "WHERE kind = 'item' AND status = 200") == 0


@pytest.mark.slow
async def test_a_redis_restart_mid_crawl_loses_nothing(comps: Components,
                                                       tmp_path: Path) -> None:
    """Redis killed and started again (same address, its append-only file) while four
    sources are being fetched: the crawl rides it out and ends idle with every item
    staged once and no task FAILED for an infrastructure reason. It once died with a
    traceback (exit 70), and the items in flight were FAILED with ``ConnectionError``."""
    specs = small_site(4, hosts(), backlog=80)
    redis_dir, port = tmp_path / "redis", free_port()
    aof = ["--appendonly", "yes", "--appendfsync", "everysec"]
    server = spawn_redis(redis_dir, port, aof)
    with SimulatorThread(specs) as st:
        sources_file = tmp_path / "sources.yaml"
        # 5 requests/s a source: ~20 s of crawl, so most of it is still ahead when the
        # first staging flush (after at most 5 s) shows the crawl is under way.
        sources_file.write_text(yaml.safe_dump(sources_document(specs, rate=5.0,
                                                                concurrency=2)))
        env = {**tier_env(comps, tmp_path / "state"),
               "STRATACRAWL_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
        proc = _crawl(sources_file, env, "--seconds", "150")
        try:
            staged = await _wait_for(comps, "SELECT count(*) FROM staging WHERE kind = 'item'",
                                     40, proc)
            assert staged >= 40, "the crawl should be fetching items before Redis goes"
            assert proc.poll() is None, "the crawl should still be running when Redis goes"
            server.kill()
            server.wait(10)
            await asyncio.sleep(3.0)
            server = spawn_redis(redis_dir, port, aof)
            out, err = proc.communicate(timeout=170)
        finally:
            if proc.poll() is None:
                proc.kill()
            server.kill()
            server.wait(10)
    text = out.decode() + err.decode()
    assert proc.returncode == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "Redis is not answering" in text and "Redis answers again" in text, text[-3000:]
    await _every_item_staged_once(comps, st)
    failed = await _count(comps, "SELECT count(*) FROM tasks WHERE state = 'FAILED'")
    assert failed == 0, "no page of this site fails: an infrastructure error is no attempt"
    assert await _count(comps, "SELECT count(*) FROM tasks WHERE state IN "
                        "('LEASED', 'FETCHING')") == 0


@pytest.mark.slow
async def test_sigterm_drains_like_sigint(comps: Components, tmp_path: Path) -> None:
    """SIGTERM (a Prefect cancellation, ``docker stop``) mid-crawl: the crawl stops
    claiming, lands every page it fetched, gives its other tasks back and reports, exiting
    143 within the drain time. It once died within 20 ms: 640 fetched pages never reached
    staging and 960 tasks stayed FETCHING until their leases expired."""
    specs = small_site(3, hosts(), backlog=300,
                       behaviour=Behaviour(latency_median_ms=400.0, latency_sigma=0.3))
    with SimulatorThread(specs) as st:
        sources_file = tmp_path / "sources.yaml"
        sources_file.write_text(yaml.safe_dump(sources_document(specs, rate=50.0,
                                                                concurrency=8)))
        env = {**tier_env(comps, tmp_path / "state"), "STRATACRAWL_DRAIN_S": "3"}
        proc = _crawl(sources_file, env, "--json", "--seconds", "120")
        try:
            staged = await _wait_for(comps, "SELECT count(*) FROM staging WHERE kind = 'item'",
                                     30, proc)
            assert staged >= 30
            held = await _count(comps, "SELECT count(*) FROM tasks WHERE state IN "
                                "('LEASED', 'FETCHING')")
            assert held > 0, "the crawl should hold tasks when it is stopped"
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
        del st
    assert proc.returncode == 143, err.decode()[-3000:]
    assert took < 3 + 5, f"stopped {took:.1f} s after SIGTERM: {err.decode()[-4000:]}"
    import json

    report = json.loads(out.decode().strip().splitlines()[-1])
    assert report["final"] and report["fetched"] > 0
    rows = await _count(comps, "SELECT count(*) FROM staging")
    assert report["landed"] == report["fetched"] == rows, report
    assert await _count(comps, "SELECT count(*) FROM tasks WHERE state IN "
                        "('LEASED', 'FETCHING')") == 0
    # What was given back did not count as an attempt: nothing was fetched twice.
    assert await _count(comps, "SELECT count(*) FROM tasks WHERE state = 'PENDING' "
                        "AND attempts > 0 AND last_status IS NULL") == 0
    print(f"SIGTERM: {report['fetched']} fetched and landed, exit after {took:.1f} s")


@pytest.mark.slow
async def test_a_trickling_server_is_cut_off_at_the_deadline(comps: Components) -> None:
    """A server that sends its page a byte a second: the fetch ends ``timeout-total`` at
    the source's deadline (it held its batch for 150 s with a read timeout per byte), and
    the batch's other pages are fetched and landed."""
    from aiohttp import web

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        for _ in range(600):
            await response.write(b"x")
            await asyncio.sleep(1.0)
        return response

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=f"<html><title>{request.path}</title></html>",
                            content_type="text/html")

    app = web.Application()
    app.router.add_get("/slow", trickle)
    app.router.add_get("/robots.txt", lambda r: web.Response(status=404))
    app.router.add_get("/{name}", page)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    base = f"http://127.0.0.1:{port}"
    try:
        from stratacrawl.cold.tasks import NewTask
        from stratacrawl.crawl import crawl
        from stratacrawl.sources import parse_sources
        from stratacrawl.urls import canonical_fingerprint, canonicalize

        sources = parse_sources({"sources": [{
            "id": "trickle", "seeds": [f"{base}/a"], "allow_private_networks": True,
            "rate": 50, "concurrency": 1, "batch_size": 10, "sitemaps": False,
            "timeout_s": 30, "deadline_s": 3}]})
        urls = [f"{base}/slow", *(f"{base}/p{i}" for i in range(9))]
        await comps.frontier.add([NewTask("trickle", u, canonical_fingerprint(canonicalize(u)))
                                  for u in urls])
        t0 = time.monotonic()
        report = await crawl(comps, sources, until_idle=False, seconds=8, flush_s=0.3)
        took = time.monotonic() - t0
    finally:
        await runner.cleanup()
    assert report.sources["trickle"].reasons["timeout-total"] == 1, report.sources
    assert took < 8 + 10 + 3, f"--seconds 8 returned after {took:.0f} s"
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT url, state, last_error FROM tasks WHERE source_id = 'trickle'")).fetchall()
    by_url = {u: (s, e) for u, s, e in rows}
    assert by_url[f"{base}/slow"] == ("RETRY_WAIT", "timeout-total")
    landed = await _count(comps, "SELECT count(*) FROM staging WHERE source_id = 'trickle' "
                          "AND status = 200")
    assert landed >= 9  # the nine pages and the seed


@pytest.mark.slow
async def test_a_killed_run_is_taken_over_within_seconds(comps: Components,
                                                         tmp_path: Path) -> None:
    """kill -9 of a crawl holding leases, then a new crawl: the dead run's connection
    closed, so its advisory lock is free and its leases are reclaimed within 3 s of the
    new run's start — not after its 15 s heartbeat went stale (the restarted crawl once
    fetched nothing for 14 s)."""
    from stratacrawl.crawl import crawl
    from tests.support.sites import sources_for

    specs = small_site(2, hosts(), backlog=80,
                       behaviour=Behaviour(latency_median_ms=200.0, latency_sigma=0.3))
    with SimulatorThread(specs) as st:
        sources_file = tmp_path / "sources.yaml"
        sources_file.write_text(yaml.safe_dump(sources_document(specs, rate=20.0,
                                                                concurrency=2)))
        proc = _crawl(sources_file, tier_env(comps, tmp_path / "state"), "--worker-id", "w1")
        held_sql = ("SELECT count(*) FROM tasks WHERE state IN ('LEASED', 'FETCHING') "
                    "AND lease_owner LIKE 'w1~%%'")
        try:
            await _wait_for(comps, "SELECT count(*) FROM staging WHERE kind = 'item'", 10, proc)
            assert await _wait_for(comps, held_sql, 2, proc) >= 2
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        dead = await _count(comps, held_sql)
        assert dead >= 2
        t0 = time.monotonic()
        run = asyncio.create_task(crawl(comps, sources_for(specs, rate=20.0, concurrency=2),
                                        worker_id="w2", until_idle=True, seconds=120,
                                        flush_s=0.3))
        took = None
        while not run.done() and time.monotonic() - t0 < 30:
            if await _count(comps, held_sql) == 0:
                took = time.monotonic() - t0
                break
            await asyncio.sleep(0.05)
        await run
        print(f"takeover: {dead} leases of the killed run reclaimed {took} s after the start")
        assert took is not None and took <= 3.0, took
        await _every_item_staged_once(comps, st)
