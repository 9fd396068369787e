"""The GX project's checkpoints over records in PostgreSQL, one test per way a real crawl
goes wrong: each shows exactly the expected check failing. Results are stored, alerts
raised, Data Docs written, and GX's own API gives the same result."""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stratacrawl.clean.records import record_fingerprint
from stratacrawl.cold.alerts import open_alerts
from stratacrawl.cold.records import Record, ensure_partitions, upsert
from stratacrawl.sources import Source, parse_sources
from stratacrawl.validate.runner import VALIDATION_FAILED, SuiteResult, Validator
from stratacrawl.wiring import Components
from tests.support.hosts import hosts

pytestmark = pytest.mark.integration

SOURCE = {"id": "shop", "seeds": ["http://shop.test/"], "expected_daily": 200, "freshness": "2h",
          "required": ["name", "price"],
          "extract": {"kind": "rules", "fields": {
              "name": {"css": "h1"}, "price": {"css": ".p", "type": "price"},
              "listed": {"css": "time", "attr": "datetime", "type": "date"},
              "link": {"css": "a", "attr": "href", "type": "url"}}}}


def today() -> date:
    """Today (UTC), read when a test needs it: a suite that runs past midnight must not
    validate yesterday as if it were still in progress."""
    return datetime.now(UTC).date()


def source(**changes: Any) -> Source:
    return parse_sources({"sources": [{**SOURCE, **changes}]}).sources[0]


async def land(comps: Components, src: Source, n: int, *, day: date | None = None,
               edit: Any = None, duplicate: int = 0) -> None:
    """``n`` records of ``src`` on ``day`` (today), items of their own (URLs of the day),
    first seen five minutes before the day's end (or before now, but within the day);
    ``edit(i, fields)`` spoils some; ``duplicate`` more records re-use URLs under item keys
    of their own (a store the cleaner did not write: the uniqueness check still holds)."""
    day = day or today()
    start = datetime.combine(day, datetime.min.time(), tzinfo=UTC)
    seen = max(start, min(datetime.now(UTC), start + timedelta(days=1)) - timedelta(minutes=5))
    records = []
    for i in range(n + duplicate):
        k = i % n
        fields: dict[str, Any] = {"name": f"item {k} of {day}", "price": 10.0 + k, "listed": "2026-01-02",
                                  "link": f"http://shop.test/p/{k}"}
        if i >= n:
            fields["name"] += " (again)"
        if edit:
            edit(i, fields)
        url = f"http://shop.test/{day}/p/{k}"
        records.append(Record(src.id, day, record_fingerprint(src.id, url, fields), url, url,
                              f"h{i}-{day}", i, None, None, seen, fields))
    await ensure_partitions(comps.pool, {(r.source_id, r.day) for r in records})
    async with comps.pool.connection() as conn, conn.transaction():
        await upsert(conn, records)
        await conn.execute("UPDATE records SET created_at = %s WHERE day = %s", (seen, day))


def validator(comps: Components, tmp_path: Path) -> Validator:
    s = comps.settings   # (changed in place: the test's ops page serves these folders)
    s.expectations_dir = tmp_path / "exp"
    s.gx_results_dir, s.data_docs_dir = tmp_path / "results", tmp_path / "docs"
    return comps.validator()


def failing(result: SuiteResult) -> set[tuple[str, str | None]]:
    return {(c.check, c.column) for c in result.checks if not c.success}


async def test_a_clean_day_passes_and_is_stored(comps: Components, tmp_path: Path) -> None:
    src = source()
    v = validator(comps, tmp_path)
    yesterday = today() - timedelta(days=1)
    await land(comps, src, 200, day=yesterday)
    (result,) = await v.validate([src], [yesterday])
    assert result.success, result.failures
    assert not result.suite_committed   # the project was new: its objects were written
    assert {c.check for c in result.checks} == {"count", "freshness", "completeness",
                                                "validity", "uniqueness"}
    assert result.count_basis == "expected_daily"
    count = next(c for c in result.checks if c.check == "count")
    assert count.observed == 200 and count.expected == {"min_value": 190, "max_value": 210}
    fresh = next(c for c in result.checks if c.check == "freshness")
    assert isinstance(fresh.observed, str) and fresh.observed.startswith(str(yesterday))
    assert result.data_docs and Path(result.data_docs.removeprefix("file://")).exists()
    async with comps.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT success, jsonb_array_length(results) FROM validation_results")).fetchone()
    assert row == (True, len(result.checks))
    assert await open_alerts(comps.pool, VALIDATION_FAILED) == []
    (again,) = await v.validate([src], [yesterday])
    assert again.suite_committed and again.success


async def test_a_silent_redesign_fails_completeness_only(comps: Components,
                                                         tmp_path: Path) -> None:
    """200 OK, every page still parses, the required fields are gone."""
    src = source()

    def redesigned(i: int, fields: dict[str, Any]) -> None:
        fields.pop("name"), fields.pop("price")

    await land(comps, src, 200, edit=redesigned)
    (result,) = await validator(comps, tmp_path).validate([src], [today()])
    assert failing(result) == {("completeness", "name"), ("completeness", "price")}
    (alert,) = await open_alerts(comps.pool, VALIDATION_FAILED)
    assert alert.source_id == "shop" and "completeness name" in alert.message
    # the result names the alert it raised (the validation flow notifies with it, as P1)
    assert (result.alert_id, alert.level) == (alert.id, "P1")
    (again,) = await validator(comps, tmp_path).validate([src], [today()])
    assert again.alert_id is None   # still failing: folded into the open alert, no new notice


async def test_malformed_values_fail_validity_not_completeness(comps: Components,
                                                               tmp_path: Path) -> None:
    src = source()

    def spoiled(i: int, fields: dict[str, Any]) -> None:
        if i % 10 == 0:
            del fields["name"]                   # 10 % missing: completeness
        if i == 3:
            fields["price"] = -1.0               # a price that is not > 0
        if i == 4:
            fields["listed"] = "2999-01-01"      # a date in the future
        if i == 5:
            fields["link"] = "/p/5"              # a relative URL
        if i == 6:
            fields["listed"] = "yesterday"       # not a date at all

    await land(comps, src, 200, edit=spoiled)
    (result,) = await validator(comps, tmp_path).validate([src], [today()])
    assert failing(result) == {("completeness", "name"), ("validity", "price__number"),
                               ("validity", "listed__time"), ("validity", "listed"),
                               ("validity", "link")}
    completeness = next(c for c in result.checks if c.column == "name")
    assert completeness.unexpected_percent == pytest.approx(10.0)


async def test_a_partial_drop_out_fails_count_against_the_expectation(
        comps: Components, tmp_path: Path) -> None:
    """10 % of the items never became records (whatever the crawler queued)."""
    src = source()
    yesterday = today() - timedelta(days=1)
    await land(comps, src, 180, day=yesterday)
    await land(comps, src, 180)
    v = validator(comps, tmp_path)
    (closed,) = await v.validate([src], [yesterday])
    assert failing(closed) == {("count", "record_url")}
    count = next(c for c in closed.checks if c.check == "count")
    assert count.observed == 180 and count.expected == {"min_value": 190, "max_value": 210}
    (ongoing,) = await v.validate([src], [today()])   # a day in progress: held to its share
    share = next(c for c in ongoing.checks if c.check == "count").expected["min_value"]
    assert share < 190 and ongoing.count_basis.startswith("expected_daily, ")


async def test_count_learns_from_history_then_fails_a_drop_out(comps: Components,
                                                               tmp_path: Path) -> None:
    src = source(expected_daily=None)
    v = validator(comps, tmp_path)
    days = [today() - timedelta(days=i) for i in (6, 5, 4)]   # closed days, oldest first
    for d in days:
        await land(comps, src, 200, day=d)
    first = await v.validate([src], days)
    assert [r.count_basis for r in first] == [f"learning ({i} of 3 days)" for i in (0, 1, 2)]
    assert all(r.success for r in first)
    assert {c.status for r in first for c in r.checks if c.check == "count"} == {"learning"}
    await land(comps, src, 180, day=today() - timedelta(days=3))
    (dropped,) = await v.validate([src], [today() - timedelta(days=3)])
    assert dropped.count_basis == "median of 3 days"
    assert failing(dropped) == {("count", "record_url")}


async def test_duplicated_records_fail_uniqueness(comps: Components, tmp_path: Path) -> None:
    src = source()
    await land(comps, src, 200, duplicate=10)   # ten URLs recorded twice the same day
    (result,) = await validator(comps, tmp_path).validate([src], [today()])
    assert failing(result) == {("uniqueness", "record_url")}
    assert next(c for c in result.checks if c.check == "count").observed == 200


async def test_an_empty_day_fails_completeness(comps: Components, tmp_path: Path) -> None:
    src = source()
    await land(comps, src, 200)
    (result,) = await validator(comps, tmp_path).validate([src], [today() - timedelta(days=1)])
    assert {("completeness", "name"), ("completeness", "price"),
            ("count", "record_url"), ("freshness", "record_first_seen")} <= failing(result)
    assert next(c for c in result.checks if c.check == "count").observed == 0


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and "uncommitted" not in p.parts}


async def test_gx_api_runs_the_same_checkpoint(comps: Components, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A data engineer's run of the committed checkpoint, with GX's API alone, agrees with
    `stratacrawl validate`; neither run changes the committed project."""
    import great_expectations as gx

    from stratacrawl.cold.db import sqlalchemy_url

    src, day = source(), today()
    v = validator(comps, tmp_path)
    await land(comps, src, 200, day=day,
               edit=lambda i, f: f.pop("name") if i % 10 == 0 else None)
    (ours,) = await v.validate([src], [day])
    before = _snapshot(tmp_path / "exp")
    monkeypatch.setenv("STRATACRAWL_GX_DATABASE_URL", sqlalchemy_url(comps.runtime.database_url))
    monkeypatch.setenv("STRATACRAWL_GX_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("STRATACRAWL_DATA_DOCS_DIR", str(tmp_path / "docs"))
    context = gx.get_context(mode="file", project_root_dir=str(tmp_path / "exp"))
    run = context.checkpoints.get("records.shop").run(
        batch_parameters={"day": day.isoformat()}, expectation_parameters=ours.parameters)
    (theirs,) = run.run_results.values()
    assert theirs.success is ours.success is False
    assert sorted((r.expectation_config.type, r.expectation_config.kwargs.get("column"),
                   r.success) for r in theirs.results) == sorted(
        (c.expectation, c.column, c.success) for c in ours.checks)
    assert _snapshot(tmp_path / "exp") == before


@pytest.mark.slow
async def test_a_source_that_stops_publishing_breaks_freshness(comps: Components,
                                                               tmp_path: Path) -> None:
    import asyncio

    from stratacrawl.crawl import crawl
    from stratacrawl.sim import SimulatorThread
    from tests.support.sites import small_site, sources_for

    specs = small_site(1, hosts(), backlog=20)
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=100.0)
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
        await comps.cleaner(sources).run()
        await asyncio.sleep(6)                    # nothing new is published meanwhile
        await comps.discovery.submit(sources.sources[0], [specs[0].base_url + "/list/1"])
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)  # still fetching
    strict = parse_sources({"sources": [dict(
        sources_for(specs).model_dump()["sources"][0], freshness="5s")]})
    (result,) = await validator(comps, tmp_path).validate(strict.sources, [today()])
    assert failing(result) == {("freshness", "record_first_seen")}  # fetching goes on
    assert result.count_basis.startswith("learning")
    (alert,) = await open_alerts(comps.pool, VALIDATION_FAILED)
    assert "freshness record_first_seen" in alert.message


async def test_data_docs_are_one_click_away_over_http(comps: Components, tmp_path: Path) -> None:
    """A failed day's Data Docs page: the ops server serves the Data Docs under /docs/ and
    links each validation there; with ``STRATACRAWL_DATA_DOCS_URL`` (which `up` sets) the
    stored result and the alert link the http address too. Links were file:// paths, which
    a browser does not open from a web page."""
    from aiohttp.test_utils import TestClient, TestServer

    from stratacrawl.cold.alerts import resolve_alerts
    from stratacrawl.monitor.web import OpsApp

    src = source()
    v = validator(comps, tmp_path)
    yesterday = today() - timedelta(days=1)
    await land(comps, src, 20, day=yesterday)              # far below 200 a day: fails
    (plain,) = await v.validate([src], [yesterday])
    assert not plain.success and plain.data_docs and plain.data_docs.startswith("file://")
    sources = parse_sources({"sources": [SOURCE]})
    app = OpsApp(comps.redis, comps.pool, sources, docs_dir=tmp_path / "docs").app()
    async with TestClient(TestServer(app)) as client:
        page = await (await client.get("/")).text()
        assert "href='/docs/validations/" in page
        link = page.split("href='/docs/validations/", 1)[1].split("'", 1)[0]
        served = await client.get("/docs/validations/" + link)
        assert served.status == 200 and "text/html" in served.headers["Content-Type"]
        assert "shop" in await served.text()
        index = await client.get("/docs/", allow_redirects=True)
        assert index.status == 200 and str(index.url).endswith("/docs/index.html")
        strip = await (await client.get("/source/shop")).text()
        assert "href='/docs/validations/" in strip
    comps.runtime.settings.data_docs_url = "http://127.0.0.1:8090/docs/"
    await resolve_alerts(comps.pool, kind=VALIDATION_FAILED, source_id="shop")
    (result,) = await v.validate([src], [yesterday])
    assert result.data_docs and result.data_docs.startswith(
        "http://127.0.0.1:8090/docs/validations/"), result.data_docs
    (alert,) = await open_alerts(comps.pool, VALIDATION_FAILED)
    assert alert.details["data_docs"] == result.data_docs
