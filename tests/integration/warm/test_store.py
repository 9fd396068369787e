"""The warm store's contract, over the real Elasticsearch client against the API server:
every operation the tiers, the frontier and the reports use. Another warm backend is a
class that passes these."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.urls import fingerprint
from stratacrawl.warm.store import WarmStore
from stratacrawl.wiring import Runtime

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


@pytest.fixture
async def warm(rt: Runtime) -> AsyncIterator[WarmStore]:
    async with rt.warm_store() as store:
        yield store


def row(url: str, crawled: datetime, *, status: int = 200, accessed: datetime | None = None,
        source: str = "s") -> tuple[object, ...]:
    """A ``url_state`` row as demotion reads it."""
    return (fingerprint(url), source, url, '"e1"', "Mon, 01 Dec 2026 00:00:00 GMT",
            f"{abs(hash(url)):032x}", status, 1234, crawled, 0, accessed or crawled)


async def indexed(warm: WarmStore, *rows: tuple[object, ...]) -> None:
    ok, refused = await warm.index([d for r in rows for d in warm.docs(r)])
    assert (ok, refused) == (2 * len(rows), set())
    for family in ("url_dedup", "url_meta"):
        await warm.refresh(family)


async def test_prepare_is_idempotent_and_makes_this_and_next_weeks_indices(
        warm: WarmStore) -> None:
    await warm.prepare()
    await warm.prepare()
    now = datetime.now(UTC)   # prepare's own clock (the module's NOW may be last week's)
    assert await warm.create_weeks_ahead(1, now) == []        # made by prepare already
    made = await warm.create_weeks_ahead(2, now)
    assert sorted(made) == sorted(warm.layout.index(f, now + timedelta(weeks=2))
                                  for f in ("url_dedup", "url_meta"))
    assert "version" in await warm.info()


async def test_documents_are_found_by_dedup_and_lookup(warm: WarmStore) -> None:
    old, new = NOW - timedelta(days=40), NOW - timedelta(hours=1)
    await indexed(warm, row("http://a.test/1", old, status=404), row("http://a.test/1", new),
                  row("http://a.test/2", old))
    a, b = fingerprint("http://a.test/1"), fingerprint("http://a.test/2")

    # dedup: the newest crawl within the window, one look for many URLs
    seen = await warm.last_crawled([a, b, fingerprint("http://a.test/none")], days=45)
    assert seen == {a: pytest.approx(new.timestamp()), b: pytest.approx(old.timestamp())}
    assert await warm.last_crawled([a, b], days=7) == {a: pytest.approx(new.timestamp())}

    # lookup: the newest page metadata and its status
    doc, status = await warm.newest(a) or ({}, None)
    assert doc["url"] == "http://a.test/1" and status == 200
    assert doc["etag"] == '"e1"' and doc["content_length"] == 1234
    assert await warm.newest(fingerprint("http://a.test/none")) is None


async def test_counts_per_family_and_week(warm: WarmStore) -> None:
    old = NOW - timedelta(days=14)
    await indexed(warm, row("http://a.test/1", NOW), row("http://a.test/2", NOW),
                  row("http://a.test/3", old))
    weeks = await warm.docs_per_week("url_meta")
    this, then = (warm.layout.index("url_meta", t).rsplit("-", 1)[-1] for t in (NOW, old))
    assert weeks == {this: 2, then: 1}
    assert await warm.count("url_dedup") == await warm.count("url_meta") == 3


async def test_refused_documents_are_named_not_raised(warm: WarmStore) -> None:
    good = warm.docs(row("http://a.test/1", NOW))
    bad = {**good[0], "_id": "bad", "_source": {**good[0]["_source"], "no_such_field": 1}}
    ok, refused = await warm.index([*good, bad])      # url_dedup's mapping is strict
    assert (ok, refused) == (2, {"bad"})


async def test_stale_documents_are_paged_updated_and_deleted(warm: WarmStore) -> None:
    cutoff = NOW - timedelta(days=30)
    stale = [row(f"http://a.test/{i}", NOW - timedelta(days=1),
                 accessed=NOW - timedelta(days=40)) for i in range(5)]
    await indexed(warm, *stale, row("http://a.test/fresh", NOW))
    hits = await warm.accessed_before("url_dedup", cutoff, set(), size=10)
    assert len(hits) == 5 and all(h["_index"].startswith(warm.layout.alias("url_dedup"))
                                  for h in hits)
    skip = {hits[0]["_id"]}
    assert len(await warm.accessed_before("url_dedup", cutoff, skip, size=10)) == 4
    assert len(await warm.accessed_before("url_dedup", cutoff, set(), size=2)) == 2

    update, *delete = hits
    ok, refused = await warm.index(
        [{"_op_type": "update", "_index": update["_index"], "_id": update["_id"],
          "doc": {"last_access": NOW.isoformat()}}]
        + [{"_op_type": "delete", "_index": h["_index"], "_id": h["_id"]} for h in delete])
    assert (ok, refused) == (5, set())
    await warm.refresh("url_dedup")
    assert await warm.accessed_before("url_dedup", cutoff, set(), size=10) == []
    assert await warm.count("url_dedup") == 2


async def test_weeks_left_empty_are_dropped_this_week_never(warm: WarmStore) -> None:
    # the clock the fixture's prepare read (a suite collected before a week began and run
    # after it must not take last week for this one)
    now = datetime.now(UTC)
    old = now - timedelta(days=21)
    doc = warm.docs(row("http://a.test/1", old))
    await warm.index(doc)
    await warm.refresh("url_dedup")
    assert await warm.drop_empty_weeks(now) == []        # a week with documents stays
    await warm.index([{"_op_type": "delete", "_index": d["_index"], "_id": d["_id"]}
                      for d in doc])
    for family in ("url_dedup", "url_meta"):
        await warm.refresh(family)
    dropped = await warm.drop_empty_weeks(now)
    assert sorted(dropped) == sorted(warm.layout.index(f, old) for f in ("url_dedup", "url_meta"))
    assert await warm.drop_empty_weeks(now) == []
    assert await warm.count("url_dedup") == 0
    assert await warm.create_weeks_ahead(0, now) == []     # this week's indices were kept
