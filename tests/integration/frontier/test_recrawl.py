"""Adaptive re-crawl in a real crawl of the simulator: the front list page of a site that
keeps publishing is fetched more often than the cadence, its older pages (which only shift) and the pages
of a site that does not publish are fetched less and less; a daily budget caps the
re-fetches and leaves the rest for the next day."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stratacrawl.crawl import crawl
from stratacrawl.frontier.recrawl import next_day
from stratacrawl.sim import SimulatorThread
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


async def recurring(comps: Components) -> dict[str, list[tuple[str, float, int, int, int]]]:
    """Per source, the recurring tasks: (URL, interval, revisits, changes, staged fetches)."""
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT t.source_id, t.url, t.recrawl_s, t.revisits, t.changes, (SELECT count(*) "
            "FROM staging s WHERE s.task_id = t.id) FROM tasks t WHERE t.kind IN "
            "('seed', 'list', 'sitemap') ORDER BY 1, 2")).fetchall()
    out: dict[str, list[tuple[str, float, int, int, int]]] = {}
    for sid, url, interval, revisits, changes, fetches in rows:
        out.setdefault(sid, []).append((url, float(interval or 0), revisits, changes,
                                        int(fetches)))
    return out


@pytest.mark.slow
async def test_list_pages_recur_as_often_as_they_change(comps: Components) -> None:
    specs = small_site(2, hosts(), backlog=30)   # two list pages each
    publishing, still = specs
    publishing.epoch = datetime.now(UTC)
    publishing.publish_every_s = 0.4         # its list pages change all the time
    with SimulatorThread(specs):
        sources = sources_for(specs, cadence="1s", recrawl={"max_interval": "6s"})
        await crawl(comps, sources, until_idle=False, seconds=20, flush_s=0.3)
    tasks = await recurring(comps)
    busy, quiet = tasks[publishing.id], tasks[still.id]
    busy_page1 = next(t for t in busy if t[0].endswith("/list/1"))
    # every revisit of the busy front page found it changed: it went under the cadence,
    # to min_interval (half the cadence by default)
    assert busy_page1[2] >= 8 and busy_page1[3] >= busy_page1[2] - 1, busy_page1
    assert busy_page1[1] == 0.5
    # its older pages only shift by one on each new item (no new links): fetched less
    older = [t for t in busy if "/list/" in t[0] and t is not busy_page1]
    assert older and all(t[4] * 3 <= busy_page1[4] * 2 for t in older), busy
    # the still site's pages never changed after their first discovery (which counts as
    # one): 304s, the interval grew to max_interval
    assert all(changes <= 1 and revisits >= 3 for _, _, revisits, changes, _ in quiet), quiet
    assert max(interval for _, interval, *_ in quiet) == 6.0
    quiet_page1 = next(t for t in quiet if "/catalog/1" in t[0])
    assert quiet_page1[4] * 2 <= busy_page1[4], (quiet_page1, busy_page1)


@pytest.mark.slow
async def test_a_daily_budget_caps_the_refetches(comps: Components) -> None:
    specs = small_site(1, hosts(), backlog=30)
    with SimulatorThread(specs):
        sources = sources_for(specs, cadence="1s", recrawl={"adaptive": False,
                                                           "daily_budget": 3})
        report = await crawl(comps, sources, until_idle=False, seconds=8, flush_s=0.3)
    tasks = (await recurring(comps))[specs[0].id]
    refetches = sum(fetches - 1 for *_, fetches in tasks)
    assert refetches == 3, tasks
    assert report.sources[specs[0].id].over_budget >= len(tasks) - 1
    async with comps.pool.connection() as conn:
        waiting = await (await conn.execute(
            "SELECT DISTINCT due_at, last_error FROM tasks WHERE kind IN ('seed', 'list', "
            "'sitemap') AND state = 'PENDING' AND last_error IS NOT NULL")).fetchall()
    assert waiting == [(next_day(datetime.now(UTC)), "recrawl budget: 3 a day")]
