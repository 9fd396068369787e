"""The cold tier's contract, kept by the system PostgreSQL (15 on this machine kind) and
by the embedded one (16, pgserver) alike: every test runs over both, from the
``cold_comps`` fixture. What depends on the server: the schema's migrations up and down
with rows in the tables, fingerprints stored as ``uuid`` and read as hex, the ledger's
enqueue, claim, completion and retirement, and a staging flush landing pages, outcomes
and URL state in one transaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import psycopg.types.json
import pytest

from stratacrawl.cold import db
from stratacrawl.cold.pool import make_pool
from stratacrawl.cold.tasks import NewTask, Outcome, TaskState
from stratacrawl.staging.spool import Spool
from stratacrawl.staging.writer import StagingWriter
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components
from tests.support.processes import staged_fetches

pytestmark = pytest.mark.integration


def _tasks(n: int, kind: str = "item") -> list[NewTask]:
    urls = [f"http://contract.test/{kind}/{i}" for i in range(n)]
    return [NewTask("s1", u, fingerprint(u), kind) for u in urls]


async def test_fingerprints_are_stored_as_uuid_and_read_as_hex(cold_comps: Components) -> None:
    """Every way a fingerprint reaches cold and comes back: a text parameter, a binary
    array parameter, a binary COPY; loaded as text, in binary and in arrays: the same
    32-character hex string. Anything else is refused by the column."""
    fps = [fingerprint(f"http://x.test/{i}") for i in range(2)]
    async with cold_comps.pool.connection() as conn:
        await conn.execute("INSERT INTO url_state (url_hash, source_id, url, content_hash) "
                           "VALUES (%s, 's', 'http://x.test/0', %s)", (fps[0], fps[1]))
        async with conn.cursor().copy("COPY url_state (url_hash, source_id, url) FROM STDIN "
                                      "(FORMAT BINARY)") as copy:
            copy.set_types(["uuid", "text", "text"])
            await copy.write_row((fps[1], "s", "http://x.test/1"))
        assert await (await conn.execute("SELECT DISTINCT pg_typeof(url_hash)::text "
                                         "FROM url_state")).fetchall() == [("uuid",)]
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            await cur.execute("SELECT url_hash, content_hash, ARRAY[url_hash] FROM url_state "
                              "WHERE url_hash = ANY(%b::uuid[]) ORDER BY url", (fps,))
            assert await cur.fetchall() == [(fps[0], fps[1], [fps[0]]),
                                            (fps[1], None, [fps[1]])]
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            await conn.execute("INSERT INTO url_state (url_hash, source_id, url) "
                               "VALUES ('not-a-fingerprint', 's', 'http://x.test/2')")


async def test_migrations_go_down_and_up_again_with_rows_kept(cold_comps: Components) -> None:
    """Down to the revision before the lean rows (text fingerprints, a title column) and
    back to head: the queued task, its key, its URL state and the outbox entry survive
    both ways, fingerprints included."""
    from alembic import command
    from alembic.config import Config

    assert await cold_comps.frontier.add(_tasks(2)) == 2
    url = cold_comps.runtime.database_url
    async with cold_comps.pool.connection() as conn:
        await conn.execute("INSERT INTO warm_outbox (source_id, url_hashes) SELECT 's1', "
                           "array_agg(url_hash ORDER BY url_hash) FROM url_state")
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["url"] = db.sqlalchemy_url(url)
    query = ("SELECT k.url_hash, u.url_hash, t.url_hash, pg_typeof(u.url_hash)::text "
             "FROM task_keys k JOIN tasks t ON t.id = k.task_id "
             "JOIN url_state u ON u.url_hash = t.url_hash ORDER BY t.url_hash")
    expected = sorted(t.url_hash for t in _tasks(2))
    command.downgrade(cfg, "0021")
    with psycopg.connect(db.libpq_url(url)) as conn:
        rows = conn.execute(query).fetchall()
        outbox = conn.execute("SELECT url_hashes FROM warm_outbox").fetchall()
    assert [r[:3] for r in rows] == [(h, h, h) for h in expected] and rows[0][3] == "text"
    assert outbox == [(expected,)]
    command.upgrade(cfg, "head")
    assert db.current_revision(url) == db.head_revision()
    async with make_pool(url, max_size=1) as pool, pool.connection() as conn:
        rows = await (await conn.execute(query)).fetchall()
        outbox = await (await conn.execute("SELECT url_hashes FROM warm_outbox")).fetchall()
    assert [r[:3] for r in rows] == [(h, h, h) for h in expected] and rows[0][3] == "uuid"
    assert outbox == [(expected,)]


async def test_duplicate_records_of_an_item_are_merged_by_the_migration(
        cold_comps: Components) -> None:
    """At revision 0025 an item re-crawled with changed content had a record per content
    (here three, over two days, and an item seen once). Up to head: one record per item,
    in its first day, with the newest content, its versions counted and its first-seen
    time kept; ``record_items`` names each. Down again: the records stay."""
    from alembic import command
    from alembic.config import Config

    url = cold_comps.runtime.database_url
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["url"] = db.sqlalchemy_url(url)
    command.downgrade(cfg, "0025")
    d1, d2 = datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 1, 2, 10, tzinfo=UTC)
    rows = [  # (fingerprint, canonical URL, crawled at, v, created at)
        ("fa", "http://x.test/item/1", d1, 1, d1),
        ("fb", "http://x.test/item/1", d1 + timedelta(hours=2), 2, d1 + timedelta(hours=2)),
        ("fc", "http://x.test/item/1", d2, 3, d2),
        ("fd", "http://x.test/item/2", d2, 1, d2)]
    with psycopg.connect(db.libpq_url(url)) as conn:
        for day in (d1.date(), d2.date()):
            conn.execute("SELECT sc_ensure_record_partition('s1', %s)", (day,))
        for fp, canonical, crawled, v, created in rows:
            conn.execute(
                "INSERT INTO records (source_id, day, fingerprint, url, canonical_url, url_hash, "
                "crawled_at, fields, created_at) VALUES ('s1', %s, %s, %s, %s, %s, %s, %s, %s)",
                (crawled.date(), fp, canonical, canonical, fingerprint(canonical), crawled,
                 psycopg.types.json.Jsonb({"v": v}), created))
            conn.execute("INSERT INTO record_keys (fingerprint, source_id, day) "
                         "VALUES (%s, 's1', %s)", (fp, crawled.date()))
    command.upgrade(cfg, "head")
    query = ("SELECT canonical_url, day, fingerprint, fields, version, created_at, crawled_at "
             "FROM records ORDER BY canonical_url")
    with psycopg.connect(db.libpq_url(url)) as conn:
        got = conn.execute(query).fetchall()
        items = conn.execute("SELECT url_hash, day FROM record_items ORDER BY day").fetchall()
    assert got == [
        ("http://x.test/item/1", d1.date(), "fc", {"v": 3}, 3, d1, d2),
        ("http://x.test/item/2", d2.date(), "fd", {"v": 1}, 1, d2, d2)]
    assert items == [(fingerprint("http://x.test/item/1"), d1.date()),
                     (fingerprint("http://x.test/item/2"), d2.date())]
    command.downgrade(cfg, "0025")
    with psycopg.connect(db.libpq_url(url)) as conn:
        kept = conn.execute("SELECT canonical_url, fingerprint FROM records "
                            "ORDER BY canonical_url").fetchall()
        keys = conn.execute("SELECT count(*) FROM record_keys").fetchone()
    assert kept == [("http://x.test/item/1", "fc"), ("http://x.test/item/2", "fd")]
    assert keys == (2,)
    command.upgrade(cfg, "head")


async def test_the_ledger_queues_claims_finishes_and_retires(cold_comps: Components) -> None:
    c = cold_comps
    items, listing = _tasks(4), _tasks(1, "list")
    assert await c.frontier.add([*items, *listing]) == 5
    assert await c.frontier.add(items) == 0                    # each URL queued once
    batch = await c.frontier.claim("s1", 5, "w1")
    assert len(batch.tasks) == 5
    done = [Outcome(t.id, TaskState.SUCCEEDED, status=200) for t in batch.tasks]
    assert await c.frontier.complete("s1", done, "w1") == 5
    assert await c.ledger.retire(datetime.now(UTC) + timedelta(seconds=1)) == 4
    assert await c.ledger.counts() == {"s1": {"SUCCEEDED": 1}}          # the list stays
    assert await c.ledger.queued("s1", [t.url_hash for t in [*items, *listing]]) == {
        listing[0].url_hash}
    assert await c.frontier.add(items[:1]) == 1                # found again: a new task


async def _leased_heap_blocks(c: Components) -> int:
    """Heap pages a bitmap scan of the leased tasks visits (one page per index entry whose
    row it must look at: the live leases and the finished ones not yet known dead)."""
    async with c.pool.connection() as conn, conn.transaction():
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_indexscan = off")
        cur = await conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM tasks "
                                 "WHERE state IN ('LEASED', 'FETCHING')")
        plan = (await cur.fetchone())[0][0]["Plan"]
    while "Exact Heap Blocks" not in plan:
        (plan,) = plan["Plans"]
    return int(plan["Exact Heap Blocks"])


async def test_a_reclaim_reads_each_finished_lease_once(cold_comps: Components) -> None:
    """Every claim and every outcome writes a task's row anew, so the leased index keeps an
    entry per lease until a vacuum — on a large ledger, rarely. The reclaim (every few
    seconds in every crawl process) marks the finished ones dead in the index as it
    passes: after it, reading the leased tasks visits no finished lease's row again.
    (PostgreSQL 15 keeps all 3,000 entries until then: 66 heap pages a read, measured; 16
    clears them on its own here — the reclaim must not depend on that.)"""
    c = cold_comps
    async with c.pool.connection() as conn:
        await conn.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")
    assert await c.frontier.add(_tasks(3000)) == 3000
    while batch := await c.ledger.claim_direct("s1", 500, "w1", timedelta(minutes=1)):
        await c.ledger.finish([Outcome(t.id, TaskState.SUCCEEDED, status=200) for t in batch],
                              "w1")
    assert await c.ledger.reclaim_expired() == []
    assert await _leased_heap_blocks(c) == 0


async def test_a_staging_flush_lands_pages_outcomes_and_url_state(cold_comps: Components,
                                                                   tmp_path: Path) -> None:
    c = cold_comps
    await c.frontier.add(_tasks(50))
    batch = await c.frontier.claim("s1", 50, "w1")
    async with StagingWriter(pool=c.pool, frontier=c.frontier, hot_urls=c.hot_urls,
                             spool=Spool(tmp_path / "spool"), owner="w1") as writer:
        for item in staged_fetches(batch.tasks):
            await writer.add("s1", item)
        await writer.flush()
    assert writer.stats.landed == 50 and writer.stats.spooled == 0
    async with c.pool.connection() as conn:
        staged = await (await conn.execute("SELECT count(DISTINCT task_id) FROM staging")
                        ).fetchone()
        state = await (await conn.execute(
            "SELECT count(*), array_agg(DISTINCT content_hash), bool_and(http_status = 200) "
            "FROM url_state WHERE last_crawled IS NOT NULL")).fetchone()
        outbox = await (await conn.execute(
            "SELECT sum(cardinality(url_hashes)) FROM warm_outbox")).fetchone()
    assert staged == (50,) and state == (50, ["0c" * 16], True) and outbox == (50,)
    assert await c.ledger.counts() == {"s1": {"SUCCEEDED": 50}}
