"""Great Expectations suites over records in PostgreSQL: pass on clean data, fail on a day
with 10 % of a required field missing; results stored, alerts raised, Data Docs written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stratacrawl.clean.records import Record, record_fingerprint, upsert
from stratacrawl.cold.alerts import open_alerts
from stratacrawl.components import Components
from stratacrawl.sources import Source, parse_sources
from stratacrawl.validate.runner import VALIDATION_FAILED, Validator
from stratacrawl.validate.suites import write_suites

pytestmark = pytest.mark.integration

SOURCE = {"id": "shop", "seeds": ["http://shop.test/"], "expected_daily": 200, "freshness": "2h",
          "required": ["name", "price"],
          "extract": {"kind": "rules", "fields": {"name": {"css": "h1"},
                                                   "price": {"css": ".p", "type": "price"}}}}


async def land(comps: Components, source: Source, n: int, *, missing_every: int = 0,
               negative_price_at: int | None = None) -> None:
    now = datetime.now(UTC)
    records = []
    for i in range(n):
        fields: dict[str, object] = {"name": f"item {i}", "price": 10.0 + i}
        if missing_every and i % missing_every == 0:
            del fields["name"]
        if i == negative_price_at:
            fields["price"] = -1.0
        url = f"http://shop.test/p/{i}"
        records.append(Record(source.id, now.date(), record_fingerprint(source.id, url, fields),
                              url, url, f"h{i}", i, None, None, now - timedelta(minutes=5), fields))
    async with comps.pool.connection() as conn, conn.transaction():
        await upsert(conn, records)
        await conn.execute("SELECT sc_ensure_day_partition('staging', %s)", (now.date(),))
        await conn.execute(
            "INSERT INTO staging (fetched_at, fetch_key, source_id, url, status) "
            "VALUES (%s, 'k1', %s, 'http://shop.test/', 200)", (now - timedelta(minutes=5), source.id))


def validator(comps: Components, tmp_path: Path) -> Validator:
    s = comps.runtime.settings
    s.expectations_dir, s.gx_dir, s.data_docs_dir = tmp_path / "exp", tmp_path / "gx", tmp_path / "docs"
    return Validator(settings=s, database_url=comps.runtime.database_url, pool=comps.pool)


async def test_clean_day_passes_and_is_stored(comps: Components, tmp_path: Path) -> None:
    sources = parse_sources({"sources": [SOURCE]})
    v = validator(comps, tmp_path)
    assert write_suites(v.settings.expectations_dir, sources)
    await land(comps, sources.sources[0], 200)
    (result,) = await v.validate(sources.sources, [datetime.now(UTC).date()])
    assert result.success, result.failures
    assert result.suite_committed
    assert {c.check for c in result.checks} == {"count", "freshness", "completeness",
                                                "uniqueness", "sanity"}
    assert result.data_docs and Path(result.data_docs.removeprefix("file://")).exists()
    async with comps.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT success, jsonb_array_length(results) FROM validation_results")).fetchone()
    assert row == (True, len(result.checks))
    assert await open_alerts(comps.pool, VALIDATION_FAILED) == []


async def test_ten_percent_missing_fails_and_alerts(comps: Components, tmp_path: Path) -> None:
    sources = parse_sources({"sources": [SOURCE]})
    v = validator(comps, tmp_path)
    await land(comps, sources.sources[0], 200, missing_every=10, negative_price_at=3)
    (result,) = await v.validate(sources.sources, [datetime.now(UTC).date()])
    assert not result.success and not result.suite_committed
    failed = {(c.check, c.column) for c in result.checks if not c.success}
    assert failed == {("completeness", "name"), ("sanity", "price")}
    completeness = next(c for c in result.checks if c.column == "name")
    assert completeness.unexpected_percent == pytest.approx(10.0)
    (alert,) = await open_alerts(comps.pool, VALIDATION_FAILED)
    assert alert.source_id == "shop" and "completeness name" in alert.message


async def test_count_and_freshness_fail_on_a_thin_stale_day(comps: Components,
                                                            tmp_path: Path) -> None:
    doc = dict(SOURCE, freshness="1m")
    sources = parse_sources({"sources": [doc]})
    v = validator(comps, tmp_path)
    await land(comps, sources.sources[0], 150)
    async with comps.pool.connection() as conn:  # landed five minutes ago, like the fetch
        await conn.execute("UPDATE records SET created_at = now() - interval '5 minutes'")
    (result,) = await v.validate(sources.sources, [datetime.now(UTC).date()])
    failed = sorted(c.check for c in result.checks if not c.success)
    assert failed == ["count", "freshness", "freshness"]
    count = next(c for c in result.checks if c.check == "count")
    assert count.observed == 150


async def test_a_source_that_stops_publishing_breaks_freshness(comps: Components,
                                                               tmp_path: Path) -> None:
    import asyncio

    from stratacrawl.clean.cleaner import Cleaner
    from stratacrawl.crawl import crawl
    from stratacrawl.sim import SimulatorThread
    from tests.integration.fetch.test_crawl import small_site, sources_for

    specs = small_site(1, 170, backlog=20)
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=100.0)
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
        await Cleaner(pool=comps.pool, redis=comps.redis, sources=sources).run()
        await asyncio.sleep(6)                    # nothing new is published meanwhile
        await comps.discovery.submit(sources.sources[0], [specs[0].base_url + "/list/1"])
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)  # still fetching
    strict = parse_sources({"sources": [dict(
        sources_for(specs).model_dump()["sources"][0], freshness="5s")]})
    (result,) = await validator(comps, tmp_path).validate(strict.sources,
                                                          [datetime.now(UTC).date()])
    stale = {c.column for c in result.checks if c.check == "freshness" and not c.success}
    assert stale == {"record_first_seen_epoch"}   # fetching goes on, new records stopped
    (alert,) = await open_alerts(comps.pool, VALIDATION_FAILED)
    assert "freshness record_first_seen_epoch" in alert.message
