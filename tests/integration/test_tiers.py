"""Schema, index templates and clients against the real tiers."""

import asyncio
from datetime import UTC, datetime

import psycopg
import pytest
from elasticsearch import BadRequestError

from stratacrawl.cold import db
from stratacrawl.inventory import take_inventory
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Runtime, check_elasticsearch, check_postgres, check_redis

pytestmark = pytest.mark.integration


async def test_prepare_is_idempotent_and_creates_schema(rt: Runtime) -> None:
    await rt.prepare()  # second time: nothing changes, nothing fails
    assert db.current_revision(rt.database_url) == db.head_revision()
    inv = await take_inventory(rt)
    assert set(inv.cold_rows) >= {"tasks", "url_state", "staging", "records"}
    assert all(v == 0 for v in inv.cold_rows.values())


async def test_partition_helpers_create_day_partitions(rt: Runtime) -> None:
    url = db.libpq_url(rt.database_url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        r1 = await (await conn.execute(
            "SELECT sc_ensure_record_partition('news-1', '2026-11-30')")).fetchone()
        r2 = await (await conn.execute(
            "SELECT sc_ensure_record_partition('news-1', '2026-11-30')")).fetchone()
        assert r1 == r2 == ("records_news_1_20261130",)
        await conn.execute("SELECT sc_ensure_day_partition('staging', '2026-11-30')")
        await conn.execute(
            "INSERT INTO staging (fetched_at, fetch_key, source_id, url) "
            "VALUES ('2026-11-30 10:00+00', 'k1', 's', 'http://x/')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            await conn.execute(
                "INSERT INTO staging (fetched_at, fetch_key, source_id, url) "
                "VALUES ('2026-11-30 10:00+00', 'k1', 's', 'http://x/')")
        # A day with no partition is refused, not silently lost.
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(
                "INSERT INTO staging (fetched_at, fetch_key, source_id, url) "
                "VALUES ('2026-12-25 10:00+00', 'k2', 's', 'http://x/')")


async def test_ensuring_a_partition_that_exists_waits_for_no_other_writer(rt: Runtime) -> None:
    """Two cleaners land batches of one source at once: each ensures the record partition
    in its landing transaction. When the partition exists, neither may wait for the
    other's commit (the creators' lock is taken only when it may have to be created)."""
    url = db.libpq_url(rt.database_url)
    async with await psycopg.AsyncConnection.connect(url) as first, \
            await psycopg.AsyncConnection.connect(url) as second:
        for fn, args in (("sc_ensure_record_partition", "'news-2', '2026-11-29'"),
                         ("sc_ensure_day_partition", "'staging', '2026-11-29'")):
            await first.execute(f"SELECT {fn}({args})")      # created: lock held to commit
            await first.commit()
            await first.execute(f"SELECT {fn}({args})")      # first's transaction stays open
            await second.execute("SET lock_timeout = '200ms'")
            await second.execute(f"SELECT {fn}({args})")     # would time out behind first
            await second.commit()
            await first.commit()


async def test_two_writers_creating_one_partition_both_succeed(rt: Runtime) -> None:
    """The second writer finds no partition, waits for the first writer's creation to
    commit, and must then take the partition as made (not fail to create it again)."""
    url = db.libpq_url(rt.database_url)
    async with await psycopg.AsyncConnection.connect(url) as first, \
            await psycopg.AsyncConnection.connect(url) as second:
        for fn, args, made in (
                ("sc_ensure_record_partition", "'news-3', '2026-11-28'", "records_news_3_20261128"),
                ("sc_ensure_day_partition", "'staging', '2026-11-28'", "staging_20261128")):
            await first.execute(f"SELECT {fn}({args})")   # creates; lock held to commit
            waiting = asyncio.create_task(second.execute(f"SELECT {fn}({args})"))
            await asyncio.sleep(0.3)
            assert not waiting.done()                     # behind the first's lock
            await first.commit()
            assert await (await waiting).fetchone() == (made,)
            await second.commit()


async def test_task_state_is_constrained(rt: Runtime) -> None:
    async with await psycopg.AsyncConnection.connect(db.libpq_url(rt.database_url),
                                                     autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute("INSERT INTO tasks (source_id, url, url_hash, state) "
                               f"VALUES ('s', 'http://x/', '{fingerprint('http://x/')}', 'LOST')")


async def test_weekly_indices_follow_the_template(rt: Runtime) -> None:
    index = rt.layout.index("url_dedup", datetime.now(UTC))
    async with rt.warm_store() as warm:
        es = warm.es
        assert await es.indices.exists(index=index)
        mapping = await es.indices.get_mapping(index=index)
        props = mapping[index]["mappings"]["properties"]
        assert props["url_hash"]["type"] == "keyword"
        aliases = await es.indices.get_alias(index=index)
        assert rt.layout.alias("url_dedup") in aliases[index]["aliases"]
        await es.index(index=index, id="h1", document={"url_hash": "h1", "domain": "a.example"},
                       refresh=True)
        got = await es.mget(index=index, ids=["h1", "nope"])
        assert [d["found"] for d in got["docs"]] == [True, False]
        with pytest.raises(BadRequestError):  # strict mapping: typos are refused
            await es.index(index=index, id="h2", document={"url_hsh": "h2"})


async def test_health_checks_report_versions(rt: Runtime) -> None:
    assert (await check_redis(rt))[0].isdigit()
    assert "." in await check_elasticsearch(rt)
    assert (await check_postgres(rt))[0].isdigit()


def test_the_head_revision_is_alembics_head() -> None:
    """``migrate`` skips Alembic when the schema is at ``head_revision()``: it must be
    the head Alembic itself computes from the migration chain."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    assert ScriptDirectory.from_config(cfg).get_current_head() == db.head_revision()


async def test_a_schema_behind_the_head_is_migrated(rt: Runtime) -> None:
    from alembic import command
    from alembic.config import Config

    url = rt.database_url
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["url"] = db.sqlalchemy_url(url)
    command.downgrade(cfg, "0013")                # as an installation one release behind
    assert db.current_revision(url) == "0013"
    await rt.prepare()
    assert db.current_revision(url) == db.head_revision()
    with psycopg.connect(db.libpq_url(url)) as conn:
        assert conn.execute("SELECT to_regclass('task_keys')").fetchone() == ("task_keys",)


async def test_headers_stored_as_json_strings_become_objects(rt: Runtime) -> None:
    """Rows written before revision 0017 hold their headers as a JSON string; upgrading
    turns them into the object, and leaves an object as it is."""
    from alembic import command
    from alembic.config import Config

    url = rt.database_url
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["url"] = db.sqlalchemy_url(url)
    command.downgrade(cfg, "0016")
    with psycopg.connect(db.libpq_url(url), autocommit=True) as conn:
        conn.execute("SELECT sc_ensure_day_partition('staging', '2026-11-27')")
        conn.execute("INSERT INTO staging (fetched_at, fetch_key, source_id, url, headers) "
                     "VALUES ('2026-11-27 10:00+00', 'old', 's', 'http://x/', "
                     "to_jsonb('{\"etag\": \"\\\"v1\\\"\"}'::text)), "
                     "('2026-11-27 10:00+00', 'new', 's', 'http://x/', '{\"etag\": \"v2\"}')")
    await rt.prepare()
    with psycopg.connect(db.libpq_url(url)) as conn:
        got = conn.execute("SELECT fetch_key, jsonb_typeof(headers), headers->>'etag' "
                           "FROM staging ORDER BY fetch_key").fetchall()
    assert got == [("new", "object", "v2"), ("old", "object", '"v1"')]


async def test_outbox_entries_survive_a_downgrade_and_an_upgrade(rt: Runtime) -> None:
    """Revision 0018 batches the warm outbox's URL hashes into one entry per flush and
    source: an older schema's one-hash rows become one-hash entries, and a downgrade
    spreads entries back into rows, in queue order."""
    from alembic import command
    from alembic.config import Config

    url = rt.database_url
    cfg = Config()
    cfg.set_main_option("script_location", str(db.MIGRATIONS))
    cfg.attributes["url"] = db.sqlalchemy_url(url)
    h1, h2, h3, h4 = (f"{i:032x}" for i in range(1, 5))
    with psycopg.connect(db.libpq_url(url), autocommit=True) as conn:
        conn.execute("INSERT INTO warm_outbox (source_id, url_hashes) "
                     f"VALUES ('a', '{{{h1},{h2}}}'), ('b', '{{{h3}}}')")
    command.downgrade(cfg, "0017")
    with psycopg.connect(db.libpq_url(url), autocommit=True) as conn:
        got = conn.execute("SELECT url_hash, source_id FROM warm_outbox ORDER BY id").fetchall()
        assert got == [(h1, "a"), (h2, "a"), (h3, "b")]
        conn.execute("INSERT INTO warm_outbox (url_hash) VALUES (%s)", (h4,))
    await rt.prepare()
    with psycopg.connect(db.libpq_url(url)) as conn:
        got = conn.execute("SELECT url_hashes, source_id FROM warm_outbox ORDER BY id").fetchall()
        assert got == [([h1], "a"), ([h2], "a"), ([h3], "b"), ([h4], None)]
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO warm_outbox (url_hashes) VALUES ('{}')")
