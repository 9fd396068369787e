"""The staging writer: parallel flushes land every row once and acknowledge only after
the commit; a flush that fails for a reason other than the database stops the writer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stratacrawl.cold.staging import COLUMNS, StagedFetch, make_row
from stratacrawl.cold.tasks import NewTask, TaskState
from stratacrawl.staging.spool import Spool
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration


async def _claimed(comps: Components, n: int, owner: str) -> list[StagedFetch]:
    urls = [f"http://127.0.0.1:9/item/{i}" for i in range(n)]
    await comps.frontier.add([NewTask("s1", u, fingerprint(u)) for u in urls])
    tasks = []
    while len(tasks) < n:
        batch = await comps.frontier.claim("s1", 500, owner)
        assert batch.tasks, "frontier ran dry before every task was claimed"
        tasks += batch.tasks
    now = datetime.now(UTC)
    return [StagedFetch(
        row=make_row(fetched_at=now, fetch_key=f"{t.id}:1:x", source_id="s1", task_id=t.id,
                     attempt=1, url=t.url, final_url=t.url, status=200,
                     headers={"content-type": "text/html", "etag": '"v1"'},
                     content_type="text/html", body=b"<html>hi</html>", elapsed_ms=1.0,
                     trace_id="x", worker=owner, kind="item", success=True),
        outcome=(t.id, TaskState.SUCCEEDED, 200, None, None), url_hash=t.url_hash,
        content_hash="0c" * 16, etag=None, last_modified=None, succeeded=True, fetched_at=now,
        status=200, body_bytes=15, attempt=t.attempts) for t in tasks]


def _writer(comps: Components, tmp_path: Path, owner: str, **kw: object) -> StagingWriter:
    return StagingWriter(pool=comps.pool, frontier=comps.frontier,
                         hot_urls=comps.hot_urls, spool=Spool(tmp_path / "spool"),
                         owner=owner, **kw)  # type: ignore[arg-type]


async def _backlog_landed(comps: Components, tmp_path: Path, n: int, *, flush_rows: int,
                          parallel: int) -> StagingWriter:
    """A writer that was handed ``n`` rows at once (a backlog), then flushed and closed."""
    items = await _claimed(comps, n, "w1")
    async with _writer(comps, tmp_path, "w1", flush_rows=flush_rows, flush_s=60.0,
                       parallel=parallel) as writer:
        for item in items:
            await writer.add("s1", item)
        await writer.flush()
    return writer


async def test_parallel_flushes_land_each_row_once(comps: Components, tmp_path: Path) -> None:
    writer = await _backlog_landed(comps, tmp_path, 2400, flush_rows=300, parallel=3)
    assert writer.pending == 0
    assert writer.stats.landed == 2400 and writer.stats.spooled == 0
    # the backlog is split across the three free slots (800 rows each), not landed in one
    # transaction nor in eight of ``flush_rows``
    assert writer.stats.flushes == 3
    async with comps.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*), count(DISTINCT task_id) FROM staging")
        assert await cur.fetchone() == (2400, 2400)
        cur = await conn.execute("SELECT count(*) FROM url_state WHERE last_crawled IS NOT NULL")
        assert (await cur.fetchone())[0] == 2400
        cur = await conn.execute(    # headers land as the object, queryable by name
            "SELECT DISTINCT jsonb_typeof(headers), headers->>'content-type', "
            "headers->>'etag' FROM staging")
        assert await cur.fetchall() == [("object", "text/html", '"v1"')]
    assert (await comps.ledger.counts())["s1"] == {"SUCCEEDED": 2400}
    assert await comps.hot_queue.in_flight("s1") == 0    # leases acknowledged after commit


async def test_a_backlog_lands_in_flushes_of_at_most_four_times_flush_rows(
        comps: Components, tmp_path: Path) -> None:
    writer = await _backlog_landed(comps, tmp_path, 2400, flush_rows=100, parallel=2)
    assert writer.stats.landed == 2400
    assert writer.stats.flushes == 6      # 2,400 rows in flushes of 400, not 24 of 100


async def test_a_failed_flush_stops_the_writer_and_keeps_the_leases(comps: Components,
                                                                   tmp_path: Path) -> None:
    items = await _claimed(comps, 20, "w1")
    broken = items[0]
    broken.row = (*broken.row[:4], "not an int", *broken.row[5:])  # attempt: int4 column
    writer = _writer(comps, tmp_path, "w1", flush_rows=10, flush_s=60.0, parallel=2)
    async with writer:
        for item in items[:10]:
            await writer.add("s1", item)
        with pytest.raises(RuntimeError, match="staging writer stopped"):
            for item in items[10:]:
                await writer.add("s1", item)
            await writer.flush()
        writer._failure = None  # let the context exit land the rest cleanly
    counts = (await comps.ledger.counts())["s1"]
    assert counts.get("SUCCEEDED", 0) == 10 and counts.get("LEASED", 0) == 10


async def test_batches_of_one_source_share_one_client_and_close_it(comps: Components,
                                                                   tmp_path: Path) -> None:
    from stratacrawl.sources import parse_sources

    sources = parse_sources({"sources": [{"id": "s1", "seeds": ["http://127.0.0.1:9/"],
                                          "concurrency": 8}]})
    worker = comps.fetch_worker(sources=sources, writer=_writer(comps, tmp_path, "w1"),
                            worker_id="w1")
    source = sources.sources[0]
    clients = await asyncio.gather(*(worker.client_for(source) for _ in range(8)))
    assert len({id(c) for c in clients}) == 1        # eight batches starting together
    await worker.close()
    assert worker.clients == {}


async def test_a_claim_refused_by_postgresql_pauses_claims_and_gives_the_slot_back(
        comps: Components, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL shutting down answers a claim with AdminShutdown: that is our tier away,
    not one source's hiccup, so the worker pauses every claim until it answers again."""
    import psycopg

    from stratacrawl.sources import parse_sources

    sources = parse_sources({"sources": [{"id": "s1", "seeds": ["http://127.0.0.1:9/"]}]})
    worker = comps.fetch_worker(sources=sources, writer=_writer(comps, tmp_path, "w1"),
                                worker_id="w1")

    async def refused(*_: object) -> None:
        raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")

    monkeypatch.setattr(comps.frontier, "claim", refused)
    try:
        assert await worker._start_batches() == 0
        assert worker.outage.down and worker.outage.tier == "PostgreSQL"
        assert worker.slots.held == {}               # the slot taken for the claim is back
    finally:
        await worker.close()


async def test_a_list_page_discovery_waits_for_lands_without_waiting_for_a_full_flush(
        comps: Components, tmp_path: Path) -> None:
    items = await _claimed(comps, 4, "w1")
    kind, discovered_at = COLUMNS.index("kind"), COLUMNS.index("discovered_at")

    def as_list(item: StagedFetch, discovered: bool) -> StagedFetch:
        assert item.row is not None
        row = list(item.row)
        row[kind], row[discovered_at] = "list", row[0] if discovered else None
        item.row = tuple(row)
        return item

    hopped = as_list(items[2], discovered=True)    # its links went to the frontier in-process
    waiting = as_list(items[3], discovered=False)  # the discovery loop reads it from staging
    async with _writer(comps, tmp_path, "w1", flush_rows=1000, flush_s=60.0) as writer:
        await writer.add("s1", items[0])
        await writer.add("s1", hopped)
        await asyncio.sleep(1.0)
        assert writer.stats.landed == 0   # an item page and a hopped list page wait for flush_s
        await writer.add("s1", waiting)
        for _ in range(40):
            if writer.stats.landed:
                break
            await asyncio.sleep(0.05)
        assert writer.stats.landed == 3   # the waiting list page took the others with it
        assert writer.stats.awaiting_discovery == 1   # what tells the discovery loop to look


@pytest.mark.parametrize("taker", ["w2", "w1"])
async def test_a_fetch_whose_lease_was_reclaimed_does_not_land(comps: Components,
                                                               tmp_path: Path,
                                                               taker: str) -> None:
    """w1 stalled for a lease time: 4 of its tasks were reclaimed and leased again before
    its pages reached staging — by w2, or by w1 itself (the same run claims them again).
    Those 4 pages are dropped (the new claim's fetch is the one that counts), the rest
    land; staging never holds one task's page twice. The lease's owner alone let a
    same-run claim's pages land twice (a load test staged 67 items twice); the claim's
    attempt number tells the two leases apart."""
    items = await _claimed(comps, 10, "w1")
    lost = [i.outcome[0] for i in items[:4]]
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s' "
                           "WHERE id = ANY(%s)", (lost,))
    assert await comps.frontier.reclaim() == 4
    again = await comps.frontier.claim("s1", 10, taker)
    assert sorted(t.id for t in again.tasks) == sorted(lost)
    async with _writer(comps, tmp_path, "w1", flush_s=60.0) as writer:
        for item in items:
            await writer.add("s1", item)
        await writer.flush()
    assert writer.stats.landed == 6 and writer.stats.lost_leases == 4
    async with comps.pool.connection() as conn:
        cur = await conn.execute("SELECT task_id FROM staging ORDER BY task_id")
        assert [r[0] for r in await cur.fetchall()] == sorted(i.outcome[0] for i in items[4:])
        cur = await conn.execute("SELECT state, lease_owner, attempts FROM tasks "
                                 "WHERE id = ANY(%s)", (lost,))
        assert set(await cur.fetchall()) == {("LEASED", taker, 2)}   # the new claim's


@pytest.mark.slow
async def test_a_full_spool_disk_with_postgresql_away_holds_the_pages_then_spools(
        comps: Components, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL away and the spool's disk full (a small tmpfs, or an injected ENOSPC
    where this machine cannot mount): the flush neither crashes nor leaves a `.tmp`; the
    rows stay in memory, the writer says why (`spool_error`), and once the disk has room
    the next flush spools them, every one."""
    import errno

    from psycopg_pool import AsyncConnectionPool

    from tests.support.processes import fill, small_disk

    items = await _claimed(comps, 5, "w1")
    folder = tmp_path / "spool"
    away = AsyncConnectionPool("host=127.0.0.1 port=1 dbname=x connect_timeout=1",
                               min_size=0, max_size=1, open=False, timeout=1.0)
    await away.open(wait=False)
    with small_disk(folder, 64) as mounted:
        if mounted:
            fill(folder)
        else:
            def full(*_: object) -> None:
                raise OSError(errno.ENOSPC, "No space left on device")
            monkeypatch.setattr(Spool, "write", full)
        writer = StagingWriter(pool=away, frontier=comps.frontier, hot_urls=comps.hot_urls,
                               spool=Spool(folder), owner="w1", flush_s=60.0)
        for item in items:
            await writer.add("s1", item)
        await writer.flush()
        assert writer.pending == 5 and writer.stats.spooled == 0 and writer.stats.held == 5
        assert writer.spool_error and "No space left on device" in writer.spool_error
        assert not list(folder.glob("*.tmp")) and not list(folder.glob("*.batch"))
        if mounted:
            (folder / "filler").unlink()   # room again
        else:
            monkeypatch.undo()
        await writer.flush()
        assert writer.pending == 0 and writer.stats.spooled == 5 and writer.spool_error is None
        assert sum(len(Spool(folder).read(p)[1]) for p in Spool(folder).files()) == 5
        await writer.close()
    await away.close()
