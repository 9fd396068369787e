"""Cleaning staged pages of the site simulator into records, on real tiers."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from stratacrawl.clean.anomaly import FORMAT_ANOMALY, check_format_anomalies
from stratacrawl.clean.cleaner import Cleaner
from stratacrawl.cold.alerts import open_alerts
from stratacrawl.crawl import crawl
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.sources import SourcesFile
from stratacrawl.urls import canonicalize
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


@pytest.fixture
def site() -> Iterator[tuple[SimulatorThread, list[SourceSpec]]]:
    specs = small_site(3, hosts(), backlog=60)
    with SimulatorThread(specs) as st:
        yield st, specs


async def records_by_url(c: Components) -> dict[str, list[dict[str, Any]]]:
    async with c.pool.connection() as conn:
        cur = await conn.execute("SELECT canonical_url, fields FROM records")
        out: dict[str, list[dict[str, Any]]] = {}
        for url, fields in await cur.fetchall():
            out.setdefault(url, []).append(fields)
        return out


def _same(name: str, got: Any, want: Any) -> bool:
    if name == "text":
        return " ".join(str(got).split()) == " ".join(str(want).split())
    if name in ("published", "updated"):
        return datetime.fromisoformat(got) == datetime.fromisoformat(want)
    return bool(got == want)


def matching_share(truth: list[dict[str, Any]], records: dict[str, list[dict[str, Any]]],
                   required: list[str]) -> float:
    good = 0
    for item in truth:
        found = records.get(canonicalize(item["url"]), [])
        if len(found) == 1 and all(
                _same(k, found[0].get(k), v) for k, v in item.items() if k not in ("url", "id")
        ) and all(found[0].get(f) not in (None, "") for f in required):
            good += 1
    return good / len(truth)


async def crawl_and_clean(comps: Components, sources: SourcesFile) -> Cleaner:
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    cleaner = comps.cleaner(sources)
    await cleaner.run()
    return cleaner


@pytest.mark.slow
async def test_records_equal_the_ground_truth(comps: Components, site) -> None:
    st, specs = site
    sources = sources_for(specs)
    cleaner = await crawl_and_clean(comps, sources)
    truth, records = st.sim.truth(), await records_by_url(comps)
    for spec in specs:
        share = matching_share(truth[spec.id], records, sources.get(spec.id).required)
        assert share >= 0.99, (spec.id, share)
    # cleaning again is a no-op; re-cleaning a day replaces records without duplicating them
    assert (await cleaner.run()).pages == 0
    day = datetime.now(UTC).date()
    total_before = sum(len(v) for v in records.values())
    assert await cleaner.reclean(specs[0].id, day) > 0
    again = await cleaner.run()
    assert again.pages > 0 and again.inserted == 0 and again.cache_hits == again.pages
    assert sum(len(v) for v in (await records_by_url(comps)).values()) == total_before


@pytest.mark.slow
async def test_batches_are_claimed_and_landed_while_one_is_extracted(
        comps: Components, site, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cleaner claims batch N+1 while batch N is extracted and batch N-1's records are
    written; batches are extracted one at a time; every page is still cleaned once and
    the records are the ground truth."""
    from stratacrawl.clean import cleaner as cleaner_module

    st, specs = site
    sources = sources_for(specs)
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    landing = extracting = most_extracting = 0
    claims_while_landing = claims_while_extracting = 0
    real_upsert, real_claim = cleaner_module.upsert, cleaner_module.claim_for_cleaning
    real_clean = Cleaner._clean

    async def slow_upsert(*args: Any, **kwargs: Any) -> Any:
        nonlocal landing
        landing += 1
        try:
            await asyncio.sleep(0.05)   # PostgreSQL busy writing the batch
            return await real_upsert(*args, **kwargs)
        finally:
            landing -= 1

    async def claim(*args: Any, **kwargs: Any) -> Any:
        nonlocal claims_while_landing, claims_while_extracting
        claims_while_landing += landing > 0
        claims_while_extracting += extracting > 0
        return await real_claim(*args, **kwargs)

    async def slow_clean(self: Cleaner, *args: Any, **kwargs: Any) -> Any:
        nonlocal extracting, most_extracting
        extracting += 1
        most_extracting = max(most_extracting, extracting)
        try:
            await asyncio.sleep(0.05)   # extraction: the busiest stage here
            return await real_clean(self, *args, **kwargs)
        finally:
            extracting -= 1

    monkeypatch.setattr(cleaner_module, "upsert", slow_upsert)
    monkeypatch.setattr(cleaner_module, "claim_for_cleaning", claim)
    monkeypatch.setattr(Cleaner, "_clean", slow_clean)
    stats = await Cleaner(pool=comps.pool, redis=comps.redis, sources=sources,
                          batch_size=7).run()
    batches = stats.pages // 7
    assert stats.pages > 100 and most_extracting == 1
    assert claims_while_landing >= batches - 2, (claims_while_landing, batches)
    assert claims_while_extracting >= batches - 2, (claims_while_extracting, batches)
    records = await records_by_url(comps)
    assert all(len(v) == 1 for v in records.values())
    truth = st.sim.truth()
    for spec in specs:
        assert matching_share(truth[spec.id], records, sources.get(spec.id).required) >= 0.99


@pytest.mark.slow
async def test_redesign_marks_format_errors_raises_anomaly_and_reclean_recovers(
        comps: Components, site) -> None:
    st, specs = site
    sources = sources_for(specs)
    products = next(s for s in specs if s.kind == "products")
    products.behaviour.redesign = True
    await crawl_and_clean(comps, sources)
    async with comps.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT clean_state, count(*) FROM staging WHERE source_id = %s AND kind = 'item' "
            "GROUP BY 1", (products.id,))
        states = dict(await cur.fetchall())
        tasks = await (await conn.execute(
            "SELECT count(*) FILTER (WHERE attempts > 1) FROM tasks WHERE source_id = %s",
            (products.id,))).fetchone()
    assert states.get("format_error", 0) >= products.backlog and "cleaned" not in states
    assert tasks == (0,)  # a format error is never a fetch retry
    assert await check_format_anomalies(comps.pool, sources.ids) == [products.id]
    alerts = await open_alerts(comps.pool, FORMAT_ANOMALY)
    assert [a.source_id for a in alerts] == [products.id]

    # the rule fix: the new layout's selectors; one command re-cleans the day
    fixed_doc = sources_for(specs).model_dump()
    entry = next(e for e in fixed_doc["sources"] if e["id"] == products.id)
    entry["extract"]["fields"] = {
        "name": {"css": "h2.pdp-title", "type": "text"},
        "price": {"css": "div.cost", "attr": "data-cost", "type": "price"},
        "currency": {"css": "div.cost", "attr": "data-ccy", "type": "text"},
        "stock": {"css": "div.avail", "attr": "data-qty", "type": "int"}}
    fixed = SourcesFile.model_validate(fixed_doc)
    fixer = comps.cleaner(fixed)
    assert await fixer.reclean(products.id, datetime.now(UTC).date()) == states["format_error"]
    await fixer.run()
    await fixer.reclean(products.id, datetime.now(UTC).date())
    await fixer.run()  # twice: still one record per item
    records = await records_by_url(comps)
    share = matching_share(st.sim.truth()[products.id], records, ["name", "price"])
    assert share >= 0.99


@pytest.mark.slow
async def test_two_cleaner_processes_clean_every_page_once(comps: Components, site,
                                                           tmp_path) -> None:
    """``clean --processes 2``: each page claimed by one process only, the figures of both
    merged, and the records those of one cleaner (the ground truth)."""
    import yaml

    from stratacrawl.build import clean_in_child
    from stratacrawl.clean.run import clean_staged
    from stratacrawl.sources import load_sources

    st, specs = site
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(sources_for(specs).model_dump(mode="json",
                                                                 exclude={"path"})))
    sources = load_sources(path)
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    async with comps.pool.connection() as conn:
        items = (await (await conn.execute(
            "SELECT count(*) FROM staging WHERE clean_state = 'new'")).fetchone())[0]
    report = await clean_staged(comps.cleaner(sources, batch_size=20), processes=2,
                                target=comps.clean_target(sources), child=clean_in_child)
    assert report.stats.pages == items > 100
    assert sum(s.pages for s in report.stats.sources.values()) == items
    async with comps.pool.connection() as conn:
        states = dict(await (await conn.execute(
            "SELECT clean_state, count(*) FROM staging WHERE kind = 'item' GROUP BY 1"
        )).fetchall())
    assert states.get("new", 0) == 0 and states.get("cleaned", 0) == items
    truth, records = st.sim.truth(), await records_by_url(comps)
    assert all(len(v) == 1 for v in records.values())   # no record twice
    for spec in specs:
        assert matching_share(truth[spec.id], records, sources.get(spec.id).required) >= 0.99


async def test_claims_are_sized_to_the_measured_pace(comps: Components, site) -> None:
    """A claim holds about a quarter second of extraction: few slow (article) pages, many
    fast (rule) pages, never more than the batch size."""
    _, specs = site
    cleaner = Cleaner(pool=comps.pool, redis=comps.redis, sources=sources_for(specs),
                      batch_size=200)
    assert cleaner._claim_size() == 10                  # nothing measured yet
    cleaner._learn_pace(0.01)                           # 10 ms a page
    assert cleaner._claim_size() == 25
    for _ in range(20):
        cleaner._learn_pace(0.0005)
    assert cleaner._claim_size() == 200


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
async def test_a_killed_clean_leaves_no_cleaner_behind(comps: Components, site, tmp_path,
                                                       how: signal.Signals) -> None:
    """``clean --processes 2`` killed (kill -9, or SIGTERM) while it cleans: its spawned
    cleaner is gone within 5 s (it once cleaned on, then waited on the dead parent's pipe
    for good), and a restart cleans the rest, every item once."""
    import yaml

    from tests.support.processes import tier_env

    st, specs = site
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(sources_for(specs).model_dump(mode="json",
                                                                 exclude={"path"})))
    await crawl(comps, sources_for(specs), until_idle=True, seconds=120, flush_s=0.5)
    env = tier_env(comps, tmp_path / "state")
    args = [sys.executable, "-m", "stratacrawl", "clean", "--sources", str(path),
            "--processes", "2", "--follow", "--seconds", "120"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        kids: list[int] = []
        while time.monotonic() < deadline and not kids:
            kids = [k for k in _children(proc.pid) if "python" in
                    Path(f"/proc/{k}/cmdline").read_bytes().decode(errors="replace")]
            await asyncio.sleep(0.2)
        assert kids, "the clean should have spawned a cleaner"
        await asyncio.sleep(4.0)   # the child imports, then cleans
        proc.send_signal(how)
        proc.wait(30)
        gone_by = time.monotonic() + 5
        while time.monotonic() < gone_by and any(_alive(k) for k in kids):
            await asyncio.sleep(0.1)
        assert not any(_alive(k) for k in kids), f"cleaner {kids} outlived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
    if how == signal.SIGTERM:
        assert proc.returncode == 143, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    done = subprocess.run(args[:-3], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    truth, records = st.sim.truth(), await records_by_url(comps)
    assert all(len(v) == 1 for v in records.values())   # no record twice
    assert sum(len(items) for items in truth.values()) == len(records)


async def test_a_page_declaring_its_encoding_in_meta_only_is_read_right(
        comps: Components) -> None:
    """A windows-1251 page whose Content-Type names no charset, only its ``<meta
    charset>``: the record's fields are the Cyrillic text (they were mojibake), and the
    staged page keeps the encoding it was read in."""
    from aiohttp import web

    from stratacrawl.services.embedded import free_port
    from stratacrawl.sources import parse_sources

    title = "Привет мир"
    html = (f'<html><head><meta charset="windows-1251"><title>{title}</title></head>'
            f"<body><h1>{title}</h1></body></html>").encode("cp1251")

    async def item(request: web.Request) -> web.Response:
        return web.Response(body=html, headers={"Content-Type": "text/html"})

    app = web.Application()
    app.router.add_get("/robots.txt", lambda r: web.Response(status=404))
    app.router.add_get("/", lambda r: web.Response(
        text='<a href="/item/1">1</a>', content_type="text/html"))
    app.router.add_get("/item/{n}", item)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        sources = parse_sources({"sources": [{
            "id": "ru", "seeds": [f"http://127.0.0.1:{port}/"], "items": ["/item/"],
            "allow_private_networks": True, "rate": 50, "sitemaps": False,
            "extract": {"kind": "rules", "fields": {"name": {"css": "h1"}}}}]})
        await crawl(comps, sources, until_idle=True, seconds=30, flush_s=0.3)
    finally:
        await runner.cleanup()
    await comps.cleaner(sources).run()
    records = await records_by_url(comps)
    assert [r["name"] for rs in records.values() for r in rs] == [title]
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT encoding FROM staging WHERE kind = 'item'")).fetchall()
    assert rows == [("cp1251",)]


@pytest.mark.slow
async def test_bodies_are_read_by_their_rows_encoding(comps: Components, site) -> None:
    """Each staged body is decoded by its own ``body_encoding``: rows stored uncompressed
    ('identity') clean as the zstd ones do; an unknown codec is an error naming it."""
    import zstandard

    from stratacrawl.cold.staging import decode_body

    st, specs = site
    sources = sources_for(specs)
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT fetched_at, id, body FROM staging WHERE kind = 'item' AND body IS NOT NULL "
            "AND id % 2 = 0")).fetchall()
        plain = zstandard.ZstdDecompressor()
        for fetched_at, row_id, body in rows:
            await conn.execute("UPDATE staging SET body = %s, body_encoding = 'identity' "
                               "WHERE fetched_at = %s AND id = %s",
                               (plain.decompress(body), fetched_at, row_id))
    assert rows
    await comps.cleaner(sources).run()
    truth, records = st.sim.truth(), await records_by_url(comps)
    for spec in specs:
        assert matching_share(truth[spec.id], records, sources.get(spec.id).required) >= 0.99
    with pytest.raises(ValueError, match="unknown encoding 'brotli'"):
        decode_body(b"x", "brotli")


async def test_an_unchanged_page_is_not_extracted_again_nor_a_json_page_by_selectors(
        comps: Components) -> None:
    """Item pages fetched twice: the one whose body did not change is staged ``unchanged``
    and not cleaned again (its records came from the same body); the changed one is
    cleaned again; a JSON page of a source of CSS rules is a format error named by its
    content type, without being parsed. A re-clean of the day takes the unchanged page too."""
    from aiohttp import web

    from stratacrawl.cold.tasks import NewTask
    from stratacrawl.services.embedded import free_port
    from stratacrawl.sources import parse_sources
    from stratacrawl.urls import canonical_fingerprint

    served = {"n": 0}

    async def item(request: web.Request) -> web.Response:
        n = request.match_info["n"]
        if n == "3":
            return web.json_response({"name": "item 3"})   # JSON, for a rules source
        served["n"] += 1
        version = served["n"] if n == "2" else 0   # item 2 changes on every fetch
        return web.Response(text=f"<html><body><h1>item {n} v{version}</h1></body></html>",
                            content_type="text/html")

    app = web.Application()
    app.router.add_get("/robots.txt", lambda r: web.Response(status=404))
    app.router.add_get("/", lambda r: web.Response(text="".join(
        f'<a href="/item/{k}">{k}</a>' for k in (1, 2, 3)), content_type="text/html"))
    app.router.add_get("/item/{n}", item)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}"
    sources = parse_sources({"sources": [{
        "id": "s", "seeds": [f"{base}/"], "items": ["/item/"], "allow_private_networks": True,
        "rate": 50, "sitemaps": False,
        "extract": {"kind": "rules", "fields": {"name": {"css": "h1"}}}}]})
    cleaner = Cleaner(pool=comps.pool, redis=None, sources=sources)   # no parse cache

    async def states() -> dict[str, list[tuple[str, str | None]]]:
        async with comps.pool.connection() as conn:
            rows = await (await conn.execute(
                "SELECT url, clean_state, clean_error FROM staging WHERE kind = 'item' "
                "ORDER BY fetched_at, id")).fetchall()
        out: dict[str, list[tuple[str, str | None]]] = {}
        for url, state, error in rows:
            out.setdefault(url.rsplit("/", 1)[1], []).append((state, error))
        return out

    try:
        await crawl(comps, sources, until_idle=True, seconds=30, flush_s=0.3)
        first = await cleaner.run()
        assert first.pages == 3 and first.inserted == 2
        again = [f"{base}/item/{k}" for k in (1, 2)]     # stale: due for a re-crawl
        assert await comps.frontier.add([NewTask("s", u, canonical_fingerprint(u))
                                         for u in again], on_conflict="requeue") == 2
        await crawl(comps, sources, until_idle=True, seconds=30, flush_s=0.3)
    finally:
        await runner.cleanup()
    second = await cleaner.run()
    # only the changed page, whose item's record it updates
    assert (second.pages, second.inserted, second.updated) == (1, 0, 1)
    got = await states()
    assert got["1"] == [("cleaned", None), ("unchanged", None)]
    assert got["2"] == [("cleaned", None), ("cleaned", None)]
    assert got["3"] == [("format_error", "content type application/json is not one this "
                                         "source's extractor reads")]
    assert await cleaner.reclean("s", datetime.now(UTC).date()) == 5
    assert (await cleaner.run()).pages == 5
