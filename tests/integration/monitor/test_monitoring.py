"""Monitoring against the simulator: a failing source raises a P1 (held, fired once, with
a snapshot) and resolves; the Prometheus endpoint has every family; stopped publishing
breaks freshness; the inspection report; ingest judged on settled minutes only."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from stratacrawl.cold.alerts import open_alerts, raise_alert
from stratacrawl.cold.staging import ensure_partitions
from stratacrawl.crawl import crawl
from stratacrawl.fetch.classify import Kind, Verdict
from stratacrawl.fetch.result import FetchResult
from stratacrawl.hot import live as live_reads
from stratacrawl.hot.live import TRACE_LEN, LiveMetrics
from stratacrawl.monitor.evaluate import evaluate
from stratacrawl.monitor.families import SETTLE_S, WINDOW_MIN, collect
from stratacrawl.monitor.inspection import inspect
from stratacrawl.monitor.prom import FAMILIES
from stratacrawl.monitor.rules import findings
from stratacrawl.monitor.web import OpsApp
from stratacrawl.sim import SimulatorThread
from stratacrawl.sources import AlertThresholds
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


@pytest.mark.slow
async def test_failing_source_fires_p1_once_with_snapshot_then_resolves(comps: Components) -> None:
    specs = small_site(2, hosts(), backlog=30)
    bad = specs[1]
    with SimulatorThread(specs) as st:
        # Batches of two: a failing task takes three attempts and 4 s of backoff, and a
        # batch's requests are counted when the batch ends.
        sources = sources_for(specs, rate=100.0, batch_size=2)
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
        bad.behaviour.error_rate = 1.0        # 100 % 5xx from now on; its items re-crawled
        # Plain 5xx: a 503 with Retry-After would hold the whole source (politeness), and
        # an 8-second crawl would send it a request or two.
        bad.behaviour.retry_after_503 = None
        await comps.discovery.submit(sources.get(bad.id),
                                     [it["url"] for it in st.sim.truth()[bad.id]])
        await crawl(comps, sources, until_idle=False, seconds=8, flush_s=0.3)
        t0 = time.time()
        first = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=t0)
        # the failing source only: success (P1) and, as its 5xx are retried, retries (P2)
        assert {(s, f.rule, f.level) for s, f, _ in first.pending} == {
            (bad.id, "success_rate", "P1"), (bad.id, "retry_ratio", "P2")}
        assert first.fired == []              # not before it held
        fired = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=t0 + 61)
        assert {(s, f.rule, f.level) for s, f, _ in fired.fired} == {
            (bad.id, "success_rate", "P1"), (bad.id, "retry_ratio", "P2")}
        again = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=t0 + 90)
        assert again.fired == []              # fires once
        (alert,) = await open_alerts(comps.pool, "success_rate")
        assert alert.level == "P1" and alert.source_id == bad.id and alert.snapshot_id
        async with comps.pool.connection() as conn:
            errors, queues = await (await conn.execute(
                "SELECT last_errors, queues FROM alert_snapshots WHERE id = %s",
                (alert.snapshot_id,))).fetchone()
        assert errors and all(e["error"] for e in errors) and "ledger" in queues
        # the source recovers; six minutes on, its window is clean and the alert resolves
        bad.behaviour.error_rate = 0.0
        later = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=t0 + 360)
        assert (bad.id, "success_rate") in later.resolved
        assert await open_alerts(comps.pool, "success_rate") == []


async def test_an_alert_that_worsens_fires_again_at_its_new_level(comps: Components) -> None:
    """P2 success_rate (under 98 %) open, then the source falls under 90 %: P1 fires (the
    webhook hears of it) and the P2 is closed as escalated; the same or a milder level
    again is folded into the open P1."""
    ask = {"kind": "success_rate", "source_id": "esc-1", "quiet_for": timedelta(days=1)}
    p2 = await raise_alert(comps.pool, message="95 %", level="P2", **ask)
    assert p2 is not None
    assert await raise_alert(comps.pool, message="96 %", level="P2", **ask) is None
    p1 = await raise_alert(comps.pool, message="0 %", level="P1", severity="critical", **ask)
    assert p1 is not None and p1 != p2
    (alert,) = [a for a in await open_alerts(comps.pool, "success_rate") if a.source_id == "esc-1"]
    assert (alert.id, alert.level) == (p1, "P1")
    async with comps.pool.connection() as conn:
        (details,) = await (await conn.execute(
            "SELECT details FROM alerts WHERE id = %s AND resolved_at IS NOT NULL", (p2,))).fetchone()
    assert details["escalated_to"] == "P1"
    assert await raise_alert(comps.pool, message="0 %", level="P1", **ask) is None
    assert await raise_alert(comps.pool, message="95 %", level="P2", **ask) is None


async def test_prometheus_endpoint_has_all_seven_families(comps: Components) -> None:
    specs = small_site(2, hosts(), backlog=20)
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=100.0)
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
        async with TestClient(TestServer(OpsApp(comps.redis, comps.pool, sources).app())) as client:
            resp = await client.get("/metrics")
            text = await resp.text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(FAMILIES) <= set(families)
    success = {s.labels["source"]: s.value for s in families[FAMILIES[1]].samples}
    assert success == {s.id: 1.0 for s in specs}
    ingest = {(s.labels["source"], s.labels["stage"]) for s in families[FAMILIES[4]].samples}
    assert ingest == {(s.id, stage) for s in specs
                      for stage in ("fetched", "ok", "staged", "records")}
    # fetched and staged are counted over settled minutes: the crawl's, two minutes on
    later = await collect(comps.redis, comps.pool, sources.ids,
                          now=time.time() + 60 + SETTLE_S + 60)
    assert all(later[s.id].fetched_per_min > 0 and later[s.id].staged_per_min > 0
               and not findings(later[s.id], AlertThresholds(), time.time()) for s in specs)


async def test_inspection_report_and_growth(comps: Components, tmp_path: Path) -> None:
    specs = small_site(1, hosts(), backlog=20)
    with SimulatorThread(specs):
        await crawl(comps, sources_for(specs, rate=100.0), until_idle=True, seconds=60,
                    flush_s=0.3)
    first = await inspect(comps.pool, tmp_path)
    text = first.read_text()
    for section in ("Success trend", "Backlog growth", "Tables", "Worker balance", "Retries"):
        assert f"## {section}" in text
    assert specs[0].id in text and "first inspection" in text
    second = (await inspect(comps.pool, tmp_path, now=datetime.now(UTC))).read_text()
    assert "first inspection" not in second and "in 4 weeks" in second


@pytest.mark.slow
async def test_normal_noise_raises_no_alert(comps: Components) -> None:
    """Bounded no-flapping run: a minute of crawling a noisy simulator, rules evaluated
    every 5 s with a 15 s hold (the 30-minute run is the load test's)."""
    from stratacrawl.sim import build_specs

    specs = build_specs(2, 31, first_host=hosts(), noise=True)
    for s in specs:
        s.backlog = 400
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=6.0)
        crawling = asyncio.create_task(crawl(comps, sources, until_idle=False, seconds=60,
                                             flush_s=0.5))
        fired = []
        while not crawling.done():
            ev = await evaluate(comps.redis, comps.pool, sources, hold_s=15)
            fired += [(s, f.rule, f.message) for s, f, _ in ev.fired]
            await asyncio.sleep(5)
        report = await crawling
    assert report.fetched > 100  # enough requests for every rate rule to be judged
    assert fired == []
    assert await open_alerts(comps.pool) == []


async def test_ingest_is_judged_on_minutes_staging_has_caught_up_on(comps: Components) -> None:
    t = time.time()
    fetched_at = datetime.fromtimestamp(t, UTC)
    live = LiveMetrics(redis=comps.redis)
    live.record_batch(
        "s1", "w", [(f"h{i}", FetchResult(f"http://s1.example/{i}", Verdict(Kind.OK, "ok"),
                                          fetched_at, "t", status=200)) for i in range(40)])
    await live.flush()
    # 40 pages fetched this minute, none staged yet: the minute is still filling
    now = (await collect(comps.redis, comps.pool, ["s1"], now=t))["s1"]
    assert now.window.requests == 40 and now.settled.requests == 0
    assert findings(now, AlertThresholds(), t) == []
    # two minutes on, that minute is settled: 40 fetched, nothing staged is a lag
    later = t + 60 + SETTLE_S + 60
    lagging = (await collect(comps.redis, comps.pool, ["s1"], now=later))["s1"]
    assert lagging.settled.ok == 40 and lagging.staged_per_min == 0
    assert [f.rule for f in findings(lagging, AlertThresholds(), later)] == ["ingest_lag"]
    async with comps.pool.connection() as conn:
        await ensure_partitions(conn, {fetched_at.date().isoformat()})
        await conn.execute(
            "INSERT INTO staging (fetched_at, fetch_key, source_id, url) "
            "SELECT %s, 'k' || i, 's1', 'http://s1.example/' || i FROM generate_series(1, 40) i",
            (fetched_at,))
    staged = (await collect(comps.redis, comps.pool, ["s1"], now=later))["s1"]
    assert staged.staged_per_min == 40 / WINDOW_MIN
    assert findings(staged, AlertThresholds(), later) == []


async def test_live_counters_are_buffered_and_sent_in_one_go(comps: Components) -> None:
    """Batches add to the process's buffer; a flush sends all sources' counters and the
    last ``TRACE_LEN`` requests of each (newest first); a crawl sends what is left at stop."""
    live = LiveMetrics(redis=comps.redis)
    t = time.time()

    def batch(sid: str, start: int, n: int) -> list[tuple[str, FetchResult]]:
        return [(f"h{i}", FetchResult(f"http://{sid}.example/{i}", Verdict(Kind.OK, "ok"),
                                      datetime.fromtimestamp(t + i / 1000, UTC), "t",
                                      status=200, elapsed_ms=float(i % 300)))
                for i in range(start, start + n)]

    for start in range(0, 240, 60):
        live.record_batch("s1", "w", batch("s1", start, 60))
    live.record_batch("s2", "w", batch("s2", 0, 7))
    assert live.flush_due is False   # just built: the first send is a FLUSH_S away
    assert (await live_reads.window(comps.redis, "s1", 2)).requests == 0
    assert await live_reads.trace(comps.redis, "s1") == []
    await live.flush()
    assert (await live_reads.window(comps.redis, "s1", 2)).requests == 240
    assert (await live_reads.window(comps.redis, "s2", 2)).requests == 7
    trace = await live_reads.trace(comps.redis, "s1")
    assert len(trace) == TRACE_LEN
    assert [r["url"] for r in trace] == [f"http://s1.example/{i}" for i in range(239, 139, -1)]
    await live.flush()   # nothing new: nothing sent twice
    assert (await live_reads.window(comps.redis, "s1", 2)).requests == 240

    specs = small_site(1, hosts(), backlog=20)
    with SimulatorThread(specs):
        report = await crawl(comps, sources_for(specs, rate=100.0), until_idle=True,
                             seconds=60, flush_s=0.3)
    assert report.fetched > 20
    assert (await live_reads.window(comps.redis, specs[0].id, 3)).requests \
        == report.fetched


async def test_the_ops_page_agrees_with_itself(comps: Components) -> None:
    """A source at 0 % success whose alert still waits out its hold is "failing (alert
    pending)", not "ok" in green beside "success 0.0 %"; its last requests read newest
    first (batches that ended out of order were listed as they ended)."""
    from stratacrawl.sources import parse_sources

    t = time.time()
    live = LiveMetrics(redis=comps.redis)

    def results(start: float, n: int, kind: Kind, reason: str) -> list[tuple[str, FetchResult]]:
        return [(f"h{i}", FetchResult(f"http://s1.example/{start}/{i}", Verdict(kind, reason),
                                      datetime.fromtimestamp(start + i, UTC), "t", status=500))
                for i in range(n)]

    live.record_batch("s1", "w", results(t - 30, 15, Kind.TRANSIENT, "http-500"))
    await live.flush()
    live.record_batch("s1", "w", results(t - 60, 15, Kind.TRANSIENT, "http-500"))
    await live.flush()
    trace = await live_reads.trace(comps.redis, "s1")
    assert [r["at"] for r in trace] == sorted((r["at"] for r in trace), reverse=True)
    sources = parse_sources({"sources": [{"id": "s1", "seeds": ["http://s1.example/"]}]})
    async with TestClient(TestServer(OpsApp(comps.redis, comps.pool, sources).app())) as client:
        page = await (await client.get("/")).text()
    row = page.split("data-source='s1'", 1)[1].split("</tr>", 1)[0]
    assert "failing (alert pending)" in row and "class='status bad'" in row, row
    assert "0.0%" in row


async def test_work_due_and_nothing_fetched_is_stalled_and_alerts(comps: Components) -> None:
    """Tasks due for minutes and no request at all (fetch runs cancelled or crashed, no
    worker): the ops page says "stalled", never "ok", and a P1 `not_fetching` alert
    fires through the same path as the others (the event automations route)."""
    from stratacrawl.cold.tasks import NewTask
    from stratacrawl.sources import parse_sources
    from stratacrawl.urls import fingerprint

    sources = parse_sources({"sources": [{"id": "s1", "seeds": ["http://s1.example/"]}]})
    urls = [f"http://s1.example/item/{i}" for i in range(5)]
    await comps.frontier.add([NewTask("s1", u, fingerprint(u)) for u in urls])
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET due_at = now() - interval '4 minutes'")
    app = OpsApp(comps.redis, comps.pool, sources).app()
    async with TestClient(TestServer(app)) as client:
        page = await (await client.get("/")).text()
    row = page.split("data-source='s1'", 1)[1].split("</tr>", 1)[0]
    assert "stalled (alert pending)" in row and "class='status bad'" in row, row
    events: list[tuple[str, dict]] = []
    t0 = time.time()
    first = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=t0)
    assert [(s, f.rule) for s, f, _ in first.pending] == [("s1", "not_fetching")]
    ev = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=t0 + 61,
                        emit=lambda name, payload: events.append((name, payload)))
    assert [(s, f.rule, f.level) for s, f, _ in ev.fired] == [("s1", "not_fetching", "P1")]
    assert events and events[0][0] == "stratacrawl.alert.fired"
    assert events[0][1]["rule"] == "not_fetching" and events[0][1]["level"] == "P1"
    assert "stalled — not fetching: 5 tasks due" in events[0][1]["message"]
    async with TestClient(TestServer(OpsApp(comps.redis, comps.pool, sources).app())) as client:
        page = await (await client.get("/")).text()
    row = page.split("data-source='s1'", 1)[1].split("</tr>", 1)[0]
    assert ">stalled<" in row, row
    # a request of the source now: the stall is over, the alert resolves
    live = LiveMetrics(redis=comps.redis)
    live.record_batch("s1", "w", [("h", FetchResult(
        urls[0], Verdict(Kind.OK, "ok"), datetime.now(UTC), "t", status=200))])
    await live.flush()
    later = await evaluate(comps.redis, comps.pool, sources, hold_s=60, now=time.time() + 1)
    assert ("s1", "not_fetching") in later.resolved
