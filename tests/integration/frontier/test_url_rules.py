"""Learned URL rules in a real crawl of the simulator: the duplicate URLs its list pages
use (``?ref=N``, ``/index.html``) are learned from equal pages and stop being fetched;
variants queued before a rule was learned end REDUNDANT; a pinned rule applies from the
start; a revoked rule's redundant tasks are due again."""

from __future__ import annotations

import pytest

from stratacrawl.cold.tasks import NewTask
from stratacrawl.cold.url_rules import load_rules, save_rules
from stratacrawl.crawl import crawl
from stratacrawl.sim import SimulatorThread
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


async def duplicate_fetches(comps: Components, source_id: str) -> tuple[int, int]:
    """(item pages fetched whose content an earlier fetched URL already had, distinct
    item contents) of the source. A fetch that was redirected (the site's "moved story"
    trap) is not a URL variant, so it is left out."""
    async with comps.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT count(*) - count(DISTINCT u.content_hash), count(DISTINCT u.content_hash) "
            "FROM url_state u JOIN tasks t USING (url_hash) WHERE u.source_id = %s "
            "AND t.kind = 'item' AND u.http_status = 200 AND NOT EXISTS (SELECT 1 FROM "
            "staging s WHERE s.task_id = t.id AND s.final_url IS NOT NULL "
            "AND s.final_url <> s.url)", (source_id,))).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.slow
async def test_a_crawl_learns_the_duplicate_urls_and_stops_fetching_them(
        comps: Components) -> None:
    specs = small_site(1, hosts(), backlog=400)
    sid = specs[0].id
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=40.0)
        report = await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.3)
    rules = {r.rule: r for r in await load_rules(comps.pool, sid)}
    assert rules["drop-param:ref@/article/"].state == "active"
    assert rules["trailing-slash@/article/"].state == "active"
    assert all(r.counterexamples == 0 for r in rules.values() if r.state == "active")
    dups, items = await duplicate_fetches(comps, sid)
    # the site links ~22 % of its items under a second URL (~90 here): learning stops
    # most of them. Variants of a rule still undecided are held back once the pairs it
    # needs are being fetched, so what slips through is those pairs (3 a rule, two rules
    # here) and the one variant in 20 fetched to keep an active rule tested: 11-14
    # measured (19-48 when every variant was fetched until its rule was active; `bench
    # efficiency` measures the share)
    assert items >= 390 and dups <= 20, (dups, items)
    assert report.sources[sid].redundant + dups < 90
    async with comps.pool.connection() as conn:   # item pages name their canonical URL
        declared = await (await conn.execute(
            "SELECT url, canonical_url FROM url_state WHERE source_id = %s AND url LIKE "
            "'%%ref=%%' AND http_status = 200", (sid,))).fetchall()
        # a page naming itself stores '' (the URL is not kept twice)
        selves, twice = await (await conn.execute(
            "SELECT count(*) FILTER (WHERE canonical_url = ''), count(*) FILTER (WHERE "
            "canonical_url = url) FROM url_state WHERE source_id = %s", (sid,))).fetchone()
    assert declared and all(c == u.split("?")[0] for u, c in declared), declared[:3]
    assert selves >= 300 and twice == 0, (selves, twice)


async def test_learning_off_fetches_every_variant(comps: Components) -> None:
    specs = small_site(1, hosts(), backlog=200)
    sid = specs[0].id
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=200.0, url_rules={"learn": False})
        await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.3)
    dups, items = await duplicate_fetches(comps, sid)
    assert items >= 190 and dups >= 35 and await load_rules(comps.pool, sid) == []


async def test_a_pinned_rule_applies_from_the_first_link(comps: Components) -> None:
    specs = small_site(1, hosts(), backlog=200)
    sid = specs[0].id
    with SimulatorThread(specs):
        sources = sources_for(specs, rate=200.0, url_rules={
            "learn": False, "pin": ["drop-param:ref", "trailing-slash@/article/"]})
        await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.3)
    dups, _ = await duplicate_fetches(comps, sid)
    assert dups == 0


@pytest.mark.slow
async def test_queued_variants_end_redundant_and_come_back_when_a_rule_is_revoked(
        comps: Components) -> None:
    specs = small_site(1, hosts(), backlog=30)
    source = sources_for(specs, rate=200.0,
                         url_rules={"learn": False, "pin": ["drop-param:ref"]}).sources[0]
    base = specs[0].base_url
    canonical, variant = f"{base}/article/3", f"{base}/article/3?ref=3"
    await comps.frontier.add([NewTask(source.id, u, fingerprint(u), "item", 5)
                              for u in (canonical, variant)])   # queued before any rule
    with SimulatorThread(specs):
        report = await crawl(comps, sources_for(specs, rate=200.0, url_rules={
            "learn": False, "pin": ["drop-param:ref"]}), until_idle=True, seconds=60,
            flush_s=0.3)
    assert report.sources[source.id].redundant >= 1
    async with comps.pool.connection() as conn:
        state, error = await (await conn.execute(
            "SELECT state, last_error FROM tasks WHERE url_hash = %s",
            (fingerprint(variant),))).fetchone()  # type: ignore[misc]
    assert (state, error) == ("REDUNDANT", "redundant: drop-param:ref")
    await save_rules(comps.pool, source.id, [("drop-param:ref", "revoked", 5, 1, None)])
    async with comps.pool.connection() as conn:
        (state,) = await (await conn.execute(
            "SELECT state FROM tasks WHERE url_hash = %s",
            (fingerprint(variant),))).fetchone()  # type: ignore[misc]
    assert state == "PENDING"


async def test_an_item_linked_only_under_a_variant_url_is_fetched(comps: Components) -> None:
    """No sitemap: the list pages are the only way to an item, some only under ?ref=N.
    The variant is queued under its rewritten fingerprint and must be fetched, not taken
    for a redundant copy of itself."""
    from tests.support.sites import staged_items

    specs = small_site(1, hosts(), backlog=60)
    with SimulatorThread(specs) as st:
        sources = sources_for(specs, rate=200.0, sitemaps=False, url_rules={
            "learn": False, "pin": ["drop-param:ref", "trailing-slash@/article/"]})
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
        truth = {it["url"] for it in st.sim.truth()[specs[0].id]}
    assert truth <= (await staged_items(comps)).get(specs[0].id, set())


async def test_rel_canonical_is_evidence_and_contradictory_links_are_ignored_and_counted(
        comps: Components) -> None:
    """Pages whose bytes all differ (a timestamp each) but whose variants name their
    canonical URL teach the rule; a canonical link to another host, to a page that
    answered 404, or in a loop is not evidence, and each is counted."""
    from stratacrawl.cold.url_rules import CanonicalCounts, load_canonical_counts
    from stratacrawl.frontier.url_rules import UrlRules
    from stratacrawl.urls import canonical_fingerprint, canonicalize
    from stratacrawl.urls.equivalence import Rule

    h = "http://127.0.0.1:9"
    pages: list[tuple[str, int, str | None]] = []   # (URL, status, its rel=canonical)
    for k in range(3):
        pages += [(f"{h}/article/{k}?ref={k}", 200, f"{h}/article/{k}"),
                  (f"{h}/article/{k}", 200, f"{h}/article/{k}")]
    pages += [(f"{h}/article/10?ref=1", 200, "http://elsewhere.test/article/10"),
              (f"{h}/article/11?ref=1", 200, f"{h}/article/11"), (f"{h}/article/11", 404, None),
              (f"{h}/story/12?ref=1", 200, f"{h}/story/12"),
              (f"{h}/story/12", 200, f"{h}/story/12?ref=1")]
    async with comps.pool.connection() as conn:
        for n, (url, status, canonical) in enumerate(pages):
            await conn.execute(
                "INSERT INTO url_state (url_hash, source_id, url, http_status, content_hash, "
                "last_crawled, canonical_url) VALUES (%s, 's', %s, %s, %s, now(), %s)",
                (canonical_fingerprint(canonicalize(url)), url, status, f"{n:032x}", canonical))
    miner = UrlRules(pool=comps.pool, redis=comps.redis)
    assert await miner.mine("s", force=True)
    rules = {r.rule: r for r in await load_rules(comps.pool, "s")}
    assert (rules["drop-param:ref@/article/"].state,
            rules["drop-param:ref@/article/"].support) == ("active", 3)
    assert "drop-param:ref@/story/" not in rules or rules["drop-param:ref@/story/"].state != (
        "active")
    assert await load_canonical_counts(comps.pool, "s") == {
        "s": CanonicalCounts(used=3, off_host=1, missing=1, looped=2)}
    assert await miner.active("s") == (Rule.parse("drop-param:ref@/article/"),)


async def test_the_miner_reads_url_state_once_then_follows_the_outbox(
        comps: Components) -> None:
    """The first read takes the source's newest pages from ``url_state``; later reads take
    only the source's entries the URL-state feed gained since, so a pass costs what was
    fetched, not the table."""
    from stratacrawl.cold.url_rules import fetched_pages

    async def page(url: str, source: str, n: int) -> None:
        async with comps.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO url_state (url_hash, source_id, url, http_status, content_hash, "
                "last_crawled) VALUES (%s, %s, %s, 200, %s, now() + make_interval(secs => %s))",
                (fingerprint(url), source, url, f"{n:032x}", n))
            await conn.execute("INSERT INTO warm_outbox (url_hashes, source_id) "
                               "VALUES (ARRAY[%s::uuid], %s)", (fingerprint(url), source))

    for n in range(5):
        await page(f"http://a.test/{n}", "a", n)
    first, cursor = await fetched_pages(comps.pool, "a", None, 3)
    assert [u for u, *_ in first] == ["http://a.test/2", "http://a.test/3", "http://a.test/4"]
    assert (await fetched_pages(comps.pool, "a", cursor, 3))[0] == []
    await page("http://b.test/0", "b", 10)
    await page("http://a.test/5", "a", 11)
    await page("http://b.test/1", "b", 12)
    later, after = await fetched_pages(comps.pool, "a", cursor, 100)
    assert [u for u, *_ in later] == ["http://a.test/5"] and after == cursor + 2
    assert (await fetched_pages(comps.pool, "a", after, 100))[0] == []
    b_pages, _ = await fetched_pages(comps.pool, "b", None, 100)
    assert [u for u, *_ in b_pages] == ["http://b.test/0", "http://b.test/1"]


async def test_the_miner_skips_the_outbox_entries_of_its_own_process(
        comps: Components) -> None:
    """A miner took its own process's pages into its sample at fetch time: the outbox
    entries that process's staging writer queued are not read back (each a join to
    ``url_state``), those of other processes and of older versions (no writer) are, and
    the cursor moves past the skipped ones; a read that stops at its limit goes on after
    the last entry it read."""
    from stratacrawl.cold.url_rules import fetched_pages

    async def page(url: str, n: int, writer: str | None) -> None:
        async with comps.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO url_state (url_hash, source_id, url, http_status, content_hash, "
                "last_crawled) VALUES (%s, 'a', %s, 200, %s, now())",
                (fingerprint(url), url, f"{n:032x}"))
            await conn.execute("INSERT INTO warm_outbox (url_hashes, source_id, writer) "
                               "VALUES (ARRAY[%s::uuid], 'a', %s)", (fingerprint(url), writer))

    def urls(pages: list[tuple[str, ...]]) -> list[str]:
        return [u.rsplit("/", 1)[1] for u, *_ in pages]

    _, cursor = await fetched_pages(comps.pool, "a", None, 100)
    for n, (name, writer) in enumerate([("own-0", "run-1"), ("other-0", "run-2"),
                                        ("own-1", "run-1"), ("old-0", None)]):
        await page(f"http://a.test/{name}", n, writer)
    got, after = await fetched_pages(comps.pool, "a", cursor, 100, skip_writers=["run-1"])
    assert urls(got) == ["other-0", "old-0"] and after == cursor + 4
    await page("http://a.test/own-2", 9, "run-1")
    got, end = await fetched_pages(comps.pool, "a", after, 100, skip_writers=["run-1"])
    assert got == [] and end == after + 1      # only its own: read past, nothing returned
    for i in range(3):
        await page(f"http://a.test/other-{i + 1}", 10 + i, "run-2")
        await page(f"http://a.test/own-{i + 3}", 20 + i, "run-1")
    first, mid = await fetched_pages(comps.pool, "a", end, 2, skip_writers=["run-1"])
    rest, last = await fetched_pages(comps.pool, "a", mid, 2, skip_writers=["run-1"])
    assert urls(first) == ["other-1", "other-2"] and urls(rest) == ["other-3"]
    assert last == end + 6
    everything, _ = await fetched_pages(comps.pool, "a", cursor, 100)   # no writer skipped
    assert len(everything) == 11


async def test_pages_a_process_fetched_are_mined_before_their_staging_flush(
        comps: Components) -> None:
    """A crawl process puts each page it fetched into its miner's sample at once: equal
    pages under ``?ref=`` variants are learned from with nothing in ``url_state`` or the
    outbox yet (a short crawl used to end before its first rule applied)."""
    rules = comps.url_rules
    assert not await rules.mine("a", force=True)          # nothing fetched, nothing to learn
    for i in range(3):
        page = f"http://a.test/article/{i}"
        rules.observe("a", page, f"content-{i}", None, "run-1")
        rules.observe("a", f"{page}?ref={i + 1}", f"content-{i}", page, "run-1")
    assert await rules.mine("a", force=True)
    assert "drop-param:ref@/article/" in {r.text() for r in await rules.active("a")}
    stored = {r.rule: r for r in await load_rules(comps.pool, "a")}
    assert stored["drop-param:ref@/article/"].support == 3


async def test_the_outbox_is_read_every_few_seconds_own_pages_at_once(
        comps: Components, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass mines the pages this process fetched as soon as they come in, but reads the
    outbox (other processes' pages) only every ``OUTBOX_EVERY_S`` — or when forced: read
    at every pass, it was a query per source every half second, pages or not."""
    from stratacrawl.frontier import url_rules as module
    monkeypatch.setattr(module, "MINING_SHARE", 1.0)      # no pacing between passes here
    reads: list[int | None] = []
    real_read = module.fetched_pages

    async def counted(*args: object, **kwargs: object) -> object:
        reads.append(1)
        return await real_read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "fetched_pages", counted)
    rules = comps.url_rules
    assert not await rules.mine("a") and len(reads) == 1     # the first pass reads
    for i in range(3):
        page = f"http://a.test/article/{i}"
        rules.observe("a", page, f"content-{i}", None, "run-1")
        rules.observe("a", f"{page}?ref={i + 1}", f"content-{i}", page, "run-1")
    assert await rules.mine("a") and len(reads) == 1         # own pages: mined, no read
    assert not await rules.mine("a") and len(reads) == 1     # nothing new: nothing at all
    await rules.mine("a", force=True)
    assert len(reads) == 2                                   # forced: read
    monkeypatch.setattr(module, "OUTBOX_EVERY_S", 0.0)
    await rules.mine("a")
    assert len(reads) == 3                                   # due again: read


async def test_a_pass_waits_until_the_sample_grew(comps: Components,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass costs O(sample): once no rule is a candidate, the next one waits for
    ``GROWTH`` more pages than the last saw, or ``STALE_S`` with new ones — not one pass
    per trickle of pages; a page that brings evidence (content another URL has, a
    canonical link elsewhere), or a rule still a candidate, gets a pass at once."""
    from stratacrawl.frontier import url_rules as module
    monkeypatch.setattr(module, "MINING_SHARE", 1.0)      # no pacing between passes here
    passes: list[int] = []
    real_mine = module.mine

    def counted(pages: dict[str, tuple[str, str]], **kwargs: object) -> object:
        passes.append(len(pages))
        return real_mine(pages, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "mine", counted)
    rules = comps.url_rules

    def fetched(first: int, n: int) -> None:
        for i in range(first, first + n):
            rules.observe("a", f"http://a.test/article/{i}", f"content-{i}", None, "run-1")

    fetched(0, 40)
    await rules.mine("a")
    assert passes == [40]
    fetched(40, 9)                 # 9 < 40 x GROWTH: not yet
    await rules.mine("a")
    assert passes == [40]
    fetched(49, 1)                 # 10 = 40 x GROWTH
    await rules.mine("a")
    assert passes == [40, 50]
    fetched(50, 1)
    await rules.mine("a", force=True)     # forced (a crawl's last pass): at once
    assert passes == [40, 50, 51]
    fetched(51, 1)
    monkeypatch.setattr(module, "STALE_S", 0.0)   # a while with new pages: a pass
    await rules.mine("a")
    assert passes == [40, 50, 51, 52]
    await rules.mine("a")          # nothing new: none
    assert passes == [40, 50, 51, 52]
    monkeypatch.setattr(module, "STALE_S", 3600.0)
    rules.observe("a", "http://a.test/article/0?ref=1", "content-0", None, "run-1")
    await rules.mine("a")          # another URL's content: evidence, a pass at once
    assert passes == [40, 50, 51, 52, 53]
    rules.observe("a", "http://a.test/article/1?ref=1", "content-1", None, "run-1")
    await rules.mine("a")          # the rule a candidate: every page counts
    assert passes == [40, 50, 51, 52, 53, 54]
    assert "drop-param:ref@/article/" not in {r.text() for r in await rules.active("a")}
    rules.observe("a", "http://a.test/article/2?ref=1", "content-2", None, "run-1")
    await rules.mine("a")          # its third pair: active, and the source settled again
    assert "drop-param:ref@/article/" in {r.text() for r in await rules.active("a")}
    fetched(60, 1)
    await rules.mine("a")
    assert passes == [40, 50, 51, 52, 53, 54, 55]
    rules.observe("a", "http://a.test/article/9", "content-9", "http://a.test/article/8",
                  "run-1")         # a page naming another URL canonical: evidence too
    await rules.mine("a")
    assert passes == [40, 50, 51, 52, 53, 54, 55, 56]
