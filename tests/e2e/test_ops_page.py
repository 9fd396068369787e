"""The ops page in headless Chromium during a crawl of the simulator, its figures checked
against the database and the hot tier."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stratacrawl.cold.metrics_history import read_minutes
from stratacrawl.crawl import crawl
from stratacrawl.monitor.families import collect
from stratacrawl.monitor.web import serve
from stratacrawl.services.embedded import free_port
from stratacrawl.sim import SimulatorThread
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.processes import dump_dom, require_chromium
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.e2e


def cells(dom: str, source_id: str) -> dict[str, str]:
    row = re.search(rf"<tr data-source=\"{re.escape(source_id)}\">(.*?)</tr>", dom, re.S)
    assert row, f"no row for {source_id}"
    return {m.group(1).split()[0]: re.sub(r"<[^>]+>", "", m.group(2)).strip()
            for m in re.finditer(r"<td class=\"([^\"]+)\">(.*?)</td>", row.group(1), re.S)}


def status_cell(dom: str, source_id: str) -> tuple[str, str]:
    """A source's status as the browser shows it: its text and its colour class."""
    row = re.search(rf"<tr data-source=\"{re.escape(source_id)}\">(.*?)</tr>", dom, re.S)
    assert row, f"no row for {source_id}"
    cell = re.search(r"<td class=\"status (\w+)\">(.*?)</td>", row.group(1), re.S)
    assert cell, row.group(1)
    return re.sub(r"<[^>]+>", "", cell.group(2)).strip(), cell.group(1)


def axis_labels(dom: str) -> dict[str, list[str]]:
    """Each chart's time-axis labels, in order."""
    charts = re.findall(r"<svg[^>]*class=\"chart (\w+)\"(.*?)</svg>", dom, re.S)
    return {name: [re.sub(r"<[^>]+>", "", t).strip() for t in
                   re.findall(r"<text[^>]*class=\"tick\"[^>]*>(.*?)</text>", body, re.S)]
            for name, body in charts}


@pytest.mark.slow
async def test_ops_page_during_and_after_a_crawl(comps: Components, tmp_path: Path) -> None:
    require_chromium()
    specs = small_site(3, hosts(), backlog=40)
    broken = specs[2]   # every answer a 5xx: its status must not read "ok"
    broken.behaviour.error_rate, broken.behaviour.retry_after_503 = 1.0, None
    port = free_port()
    stop = asyncio.Event()
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=15.0)
        server = asyncio.create_task(serve(comps.redis, comps.pool, sources, port=port, stop=stop))
        crawling = asyncio.create_task(crawl(comps, sources, until_idle=True, seconds=120,
                                             flush_s=0.3))
        await asyncio.sleep(3)
        during = await asyncio.to_thread(dump_dom, f"http://127.0.0.1:{port}/", tmp_path / "c1")
        assert all(f'data-source="{s.id}"' in during for s in specs)
        await crawling
        # (the 24 h window: the default fits the data there is, here the last hour)
        after = await asyncio.to_thread(dump_dom, f"http://127.0.0.1:{port}/?hours=24",
                                        tmp_path / "c2")
        truth = await collect(comps.redis, comps.pool, sources.ids)
        for s in specs:
            row, m = cells(after, s.id), truth[s.id]
            assert row["requests"] == str(m.window.requests) and m.window.requests > 0
            assert row["backlog"] == str(m.ledger_backlog)
            assert row["success"] == f"{m.window.success_rate:.1%}"
            assert row["alerts"] == "0"
        for s in specs[:2]:
            assert status_cell(after, s.id) == ("ok", "ok")
        # the broken source: 0 % success, and a status in the alert's colour beside it
        assert cells(after, broken.id)["success"] == "0.0%"
        # (its robots.txt answers 5xx too: one request, fewer than the rule judges)
        assert status_cell(after, broken.id) == ("failing? (1 of 20 requests to judge)", "warn")
        # every chart's time axis: five labels, each a different time (day and time in 24 h)
        timed = ("pages", "success", "latency", "backlog", "ingest")   # (alerts: a list)
        axes = {name: labels for name, labels in axis_labels(after).items() if name in timed}
        assert set(axes) == set(timed), axes
        for name, labels in axes.items():
            assert len(labels) == 5 and len(set(labels)) == 5, (name, labels)
            assert all(re.fullmatch(r"\d\d-\d\d \d\d:\d\d( UTC)?", t) for t in labels), labels
        hour = await asyncio.to_thread(dump_dom, f"http://127.0.0.1:{port}/", tmp_path / "c4")
        assert "<b>1 h</b>" in hour   # a new platform's first minutes fill the window
        for name, labels in axis_labels(hour).items():
            if name not in timed:
                continue
            assert len(set(labels)) == 5 and re.fullmatch(r"\d\d:\d\d", labels[0]), (name, labels)
        # the charts: server-side SVG with the crawl's requests in them, window links
        for chart in ("pages", "success", "latency", "backlog", "ingest", "alerts"):
            assert f'class="chart {chart}"' in after, chart
        assert 'data-series="requests"' in after and "no alert in this window" in after
        assert "?hours=1" in after and "<b>24 h</b>" in after
        charted = sum(r.requests or 0 for r in await read_minutes(
            comps.pool, datetime.now(UTC) - timedelta(hours=1)))
        assert charted == sum(truth[s.id].window.requests for s in specs)
        page = await asyncio.to_thread(dump_dom, f"http://127.0.0.1:{port}/source/{specs[0].id}",
                                       tmp_path / "c3")
        assert page.count("<tr") - 1 == min(100, truth[specs[0].id].window.requests)
        assert 'class="chart pages"' in page and "no validation yet" in page
        stop.set()
        await server
