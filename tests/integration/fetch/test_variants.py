"""Variants held back until their URL rule is known: a claimed item whose plainer URL is a
task of the source is fetched as evidence a few times, then held (given back, its attempt
refunded, due later) until the rule is active (it ends REDUNDANT) or revoked (fetched);
a plain URL is never held, nor a variant whose plain URL failed, nor one held too long."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.cold.tasks import Batch, ClaimedTask, NewTask
from stratacrawl.cold.url_rules import HELD_PREFIX, load_rules, save_rules
from stratacrawl.fetch.claims import SetAside
from stratacrawl.fetch.recording import SourceStats
from stratacrawl.fetch.variants import (
    EVIDENCE_FETCHES,
    HOLD_S,
    MAX_HOLD_S,
    VariantHold,
    canonical_urls,
)
from stratacrawl.sources import Source, parse_sources
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration

BASE = "http://shop.example"
OWNER = "run-variants"
ITEMS = 8
UTM_RULES = ("drop-param:ref@/article/", "drop-param:utm_source@/article/")


def source() -> Source:
    return parse_sources({"sources": [{
        "id": "shop", "seeds": [f"{BASE}/"], "allow": [f"^{BASE}/"],
        "items": [r"/article/\d+"], "rate": 100.0}]}).sources[0]


async def fetch_now(hold: VariantHold, tasks: list[ClaimedTask]) -> list[ClaimedTask]:
    """What the hold lets through of ``tasks`` claimed for the source "shop"."""
    return await hold(source(), tasks, (), (), canonical_urls(tasks))


def other() -> Source:
    return parse_sources({"sources": [{
        "id": "other", "seeds": ["http://other.example/"], "allow": ["^http://other.example/"],
        "items": [r"/p/\d+"], "rate": 100.0}]}).sources[0]


def variant(n: int) -> str:
    return f"{BASE}/article/{n}?utm_source=list&ref={n % 5}"


async def queue_and_claim(comps: Components, urls: list[str],
                          kind: str = "item") -> list[ClaimedTask]:
    await comps.frontier.add([NewTask("shop", u, fingerprint(u), kind) for u in urls])
    batch = await comps.frontier.claim("shop", 100, OWNER)
    return batch.tasks


async def task_row(comps: Components, url: str) -> tuple[str, int, datetime, str | None]:
    async with comps.pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT state, attempts, due_at, last_error FROM tasks WHERE url_hash = %s",
            (fingerprint(url),))).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_variants_of_an_undecided_rule_are_fetched_as_evidence_then_held(
        comps: Components) -> None:
    plain = [f"{BASE}/article/{n}" for n in range(ITEMS)]
    await comps.frontier.add([NewTask("shop", u, fingerprint(u)) for u in plain])
    claimed = await queue_and_claim(comps, [variant(n) for n in range(ITEMS)])
    hold = VariantHold(frontier=comps.frontier, url_rules=comps.url_rules, run_id=OWNER)
    fetch = await fetch_now(hold, claimed)

    by_url = {t.url: t for t in fetch}
    assert set(plain) <= set(by_url)                       # a plain URL is never held
    fetched_variants = [u for u in by_url if "?" in u]
    assert len(fetched_variants) == EVIDENCE_FETCHES       # the pairs the rule needs
    held = [variant(n) for n in range(ITEMS) if variant(n) not in by_url]
    assert len(held) == ITEMS - EVIDENCE_FETCHES
    soon = datetime.now(UTC) + timedelta(seconds=HOLD_S)
    for url in held:
        state, attempts, due_at, error = await task_row(comps, url)
        assert (state, attempts) == ("PENDING", 0)         # the claim's attempt refunded
        assert soon - timedelta(seconds=5) < due_at <= soon
        assert error == HELD_PREFIX + url.split("?")[0]

    # The rule turns active: the held variants are due at once, and a held variant
    # claimed again ends REDUNDANT, unfetched.
    await save_rules(comps.pool, "shop", [(r, "active", 3, 0, None) for r in UTM_RULES])
    await comps.frontier.refill("shop", force=True)
    again = (await comps.frontier.claim("shop", 100, OWNER)).tasks
    assert sorted(t.url for t in again) == sorted(held)
    aside = SetAside(frontier=comps.frontier, url_rules=comps.url_rules,
                     budget=comps.budget, run_id=OWNER)
    stats = SourceStats()
    assert await aside(source(), Batch("shop", "again", again), stats) == []
    assert stats.redundant == len(held)
    assert {(await task_row(comps, u))[0] for u in held} == {"REDUNDANT"}


async def test_a_revoked_rule_or_a_failed_plain_url_holds_nothing(comps: Components) -> None:
    plain = [f"{BASE}/article/{n}" for n in range(ITEMS)]
    await comps.frontier.add([NewTask("shop", u, fingerprint(u)) for u in plain])
    async with comps.pool.connection() as conn:   # the plain URL of item 0 failed for good
        await conn.execute("UPDATE tasks SET state = 'FAILED' WHERE url_hash = %s",
                           (fingerprint(plain[0]),))
    claimed = [t for t in await queue_and_claim(comps, [variant(n) for n in range(ITEMS)])
               if "?" in t.url]
    hold = VariantHold(frontier=comps.frontier, url_rules=comps.url_rules, run_id=OWNER)
    fetch = {t.url for t in await fetch_now(hold, claimed)}
    assert variant(0) in fetch and len(fetch) == 1 + EVIDENCE_FETCHES, fetch

    assert (await comps.frontier.claim("shop", 100, OWNER)).tasks == []   # held: not due
    # Once the rule is revoked the variants are pages of their own: due at once, and
    # none is held.
    await save_rules(comps.pool, "shop", [("drop-param:ref@/article/", "revoked", 3, 1, None)])
    comps.url_rules._states.clear()   # the cached states: read again now, not in 2 s
    await comps.frontier.refill("shop", force=True)
    again = (await comps.frontier.claim("shop", 100, OWNER)).tasks
    assert len(again) == ITEMS - len(fetch) > EVIDENCE_FETCHES
    assert len(await fetch_now(VariantHold(frontier=comps.frontier, url_rules=comps.url_rules,
                                           run_id=OWNER), again)) == len(again)


async def test_a_variant_held_too_long_is_fetched_and_a_slash_is_the_variant(
        comps: Components) -> None:
    clock = Clock()
    slashed = [f"{BASE}/article/{n}/" for n in range(ITEMS)]
    plain = [f"{BASE}/article/{n}" for n in range(ITEMS)]
    claimed = await queue_and_claim(comps, plain + slashed)
    hold = VariantHold(frontier=comps.frontier, url_rules=comps.url_rules, run_id=OWNER,
                       clock=clock)
    fetch = {t.url for t in await fetch_now(hold, claimed)}
    assert set(plain) <= fetch                              # the plainer form goes first
    held = [u for u in slashed if u not in fetch]
    assert len(held) == ITEMS - EVIDENCE_FETCHES
    assert (await task_row(comps, held[0]))[3] == HELD_PREFIX + held[0].rstrip("/")

    async def claim_held() -> list[ClaimedTask]:
        async with comps.pool.connection() as conn:
            await conn.execute("UPDATE tasks SET due_at = now() WHERE state = 'PENDING'")
        await comps.frontier.refill("shop", force=True)
        return (await comps.frontier.claim("shop", 100, OWNER)).tasks

    clock.now += 1.0   # the evidence window is still full: held again
    assert await fetch_now(hold, await claim_held()) == []
    clock.now += MAX_HOLD_S   # held for longer than the bound: fetched all the same
    assert {t.url for t in await fetch_now(hold, await claim_held())} == set(held)


async def test_an_idle_worker_releases_its_held_variants_and_fetches_them(
        comps: Components) -> None:
    """A hold defers work while there is other work: with nothing else to fetch, the
    held variants are due at once and, claimed again, fetched though their rule is still
    undecided."""
    plain = [f"{BASE}/article/{n}" for n in range(ITEMS)]
    await comps.frontier.add([NewTask("shop", u, fingerprint(u)) for u in plain])
    claimed = [t for t in await queue_and_claim(comps, [variant(n) for n in range(ITEMS)])
               if "?" in t.url]
    hold = VariantHold(frontier=comps.frontier, url_rules=comps.url_rules, run_id=OWNER)
    fetched = {t.url for t in await fetch_now(hold, claimed)}
    held = {variant(n) for n in range(ITEMS)} - fetched
    assert len(held) == ITEMS - EVIDENCE_FETCHES
    assert await hold.release([source(), other()]) == {"shop"}
    async with comps.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM tasks WHERE state = 'PENDING' "
                                 "AND due_at <= now() AND last_error LIKE 'held: %%'")
        assert await cur.fetchone() == (len(held),)
    await comps.frontier.refill("shop", force=True)
    again = (await comps.frontier.claim("shop", 100, OWNER)).tasks
    assert {t.url for t in again} == held
    assert {t.url for t in await fetch_now(hold, again)} == held


async def test_an_idle_release_mines_first_and_a_rule_it_decides_sets_the_held_aside(
        comps: Components) -> None:
    """The evidence fetched so far decides the rule: the idle worker's release learns it
    before making the held variants due, and claimed again they end REDUNDANT, unfetched
    (without the pass they would be fetched though their rule was already known)."""
    plain = [f"{BASE}/article/{n}" for n in range(ITEMS)]
    await comps.frontier.add([NewTask("shop", u, fingerprint(u)) for u in plain])
    claimed = [t for t in await queue_and_claim(comps, [variant(n) for n in range(ITEMS)])
               if "?" in t.url]
    hold = VariantHold(frontier=comps.frontier, url_rules=comps.url_rules, run_id=OWNER)
    evidence = [t.url for t in await fetch_now(hold, claimed)]
    held = {variant(n) for n in range(ITEMS)} - set(evidence)
    assert len(evidence) == EVIDENCE_FETCHES and len(held) == ITEMS - EVIDENCE_FETCHES
    # what the worker fetched: every plain page, and the evidence variants with their
    # plain page's content
    for n, url in enumerate(plain):
        comps.url_rules.observe("shop", url, f"content-{n}", None, OWNER)
    for url in evidence:
        comps.url_rules.observe("shop", url, f"content-{url.split('/')[-1].split('?')[0]}",
                                None, OWNER)

    assert await hold.release([source(), other()]) == {"shop"}
    assert {r.rule for r in await load_rules(comps.pool, "shop") if r.state == "active"}
    await comps.frontier.refill("shop", force=True)
    again = (await comps.frontier.claim("shop", 100, OWNER)).tasks
    assert {t.url for t in again} == held
    aside = SetAside(frontier=comps.frontier, url_rules=comps.url_rules,
                     budget=comps.budget, run_id=OWNER)
    stats = SourceStats()
    assert await aside(source(), Batch("shop", "again", again), stats) == []
    assert stats.redundant == len(held)
