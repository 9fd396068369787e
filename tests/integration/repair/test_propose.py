"""A repair proposal after a silent redesign: the products source's pages still answer
200 but none of its rules finds anything; the proposal fetches known items again, learns
every field's rule from the new pages and the values their records hold, and the rules
it proposes, applied, restore the records — without a selector written by hand."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from stratacrawl.cold import repairs
from stratacrawl.cold.alerts import open_alerts
from stratacrawl.cold.tasks import NewTask
from stratacrawl.crawl import crawl
from stratacrawl.repair.apply import DecisionError, approve, rollback
from stratacrawl.repair.propose import RepairError, propose
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.sources import SourcesFile, load_sources
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.validate.integrity import INTEGRITY
from stratacrawl.wiring import Components
from tests.integration.clean.test_cleaning import matching_share, records_by_url
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

pytestmark = pytest.mark.integration


@pytest.fixture
def site() -> Iterator[tuple[SimulatorThread, list[SourceSpec]]]:
    specs = small_site(3, hosts(), backlog=30)
    with SimulatorThread(specs) as st:
        yield st, specs


async def test_a_redesigned_source_gets_rules_that_restore_its_records(
        comps: Components, site: tuple[SimulatorThread, list[SourceSpec]]) -> None:
    st, specs = site
    sources = sources_for(specs)
    products = next(s for s in specs if s.kind == "products")
    source = sources.get(products.id)
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    await comps.clean(sources)

    products.behaviour.redesign = True    # 200s; h1.name, span.price, div.stock are gone
    proposal = await propose(comps, sources, source, sample=8)
    assert proposal.pairs == 8 and proposal.complete, proposal.as_dict()
    for name, f in proposal.fields.items():
        assert not f.kept and f.after is not None, (name, f)
        assert (f.precision, f.recall) == (1.0, 1.0), (name, f)
        assert f.after != f.before
    assert proposal.fields["price"].after["type"] == "price"
    assert len(proposal.samples) == 3
    for s in proposal.samples:
        assert s["now"] == {} and s["after"] == s["before"], s   # nothing now; all after

    # The proposal's block applied: every item fetched again in its new layout (the
    # sample's pages among them) and cleaned: one record each, all complete.
    doc = sources.model_dump()
    entry = next(e for e in doc["sources"] if e["id"] == products.id)
    entry["extract"] = proposal.extract_block(source)
    fixed = SourcesFile.model_validate(doc)
    cleaner = comps.cleaner(fixed)
    truth = st.sim.truth()[products.id]
    assert await comps.frontier.add([NewTask(products.id, t["url"], canonical_fingerprint(
        canonicalize(t["url"]))) for t in truth], on_conflict="requeue") > 0
    await crawl(comps, fixed, until_idle=True, seconds=120, flush_s=0.5)
    stats = await cleaner.run()
    assert stats.sources[products.id].format_errors == 0 and stats.pages >= len(truth)
    assert matching_share(truth, await records_by_url(comps), ["name", "price"]) >= 0.99
    # and no page of the day is left a format error
    assert await cleaner.reclean(products.id, datetime.now(UTC).date(), failed_only=True) == 0


async def test_a_source_without_known_items_is_refused_by_name(
        comps: Components, site: tuple[SimulatorThread, list[SourceSpec]]) -> None:
    _, specs = site
    sources = sources_for(specs)
    products = next(s for s in specs if s.kind == "products")
    with pytest.raises(RepairError, match=f"{products.id}: 0 record"):
        await propose(comps, sources, sources.get(products.id))
    prices = next(s for s in specs if s.kind == "prices")
    with pytest.raises(RepairError, match="json source"):
        await propose(comps, sources, sources.get(prices.id))


async def test_approval_writes_a_version_recleans_and_rollback_restores(
        comps: Components, site: tuple[SimulatorThread, list[SourceSpec]],
        tmp_path: Path) -> None:
    """Approval: the proposal's rules in the sources file (its comments and the other
    sources as they were) as version 2 (version 1 the rules it replaced), the pages the old
    rules failed on re-cleaned into records, their day validated, the layout alerts
    resolved with a note. Rollback to version 1: the old rules back, as version 3."""
    _, specs = site
    products = next(s for s in specs if s.kind == "products")
    path = tmp_path / "sources.yaml"
    path.write_text("# the shop's sources\n" + yaml.safe_dump(
        sources_document(specs, rate=200.0, concurrency=4), sort_keys=False))
    sources = load_sources(path)
    comps.settings.expectations_dir = tmp_path / "exp"
    comps.settings.gx_results_dir, comps.settings.data_docs_dir = tmp_path / "r", tmp_path / "d"
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    await comps.clean(sources)
    old_block = sources.get(products.id).extract.model_dump(exclude_none=True)

    products.behaviour.redesign = True
    truth = {t["url"] for t in site[0].sim.truth()[products.id]}
    assert await comps.frontier.add([NewTask(products.id, u, canonical_fingerprint(
        canonicalize(u))) for u in truth], on_conflict="requeue") > 0
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    report = await comps.clean(sources)
    failed = report.stats.sources[products.id].format_errors
    assert failed >= len(truth) - 1
    assert [a.source_id for a in await open_alerts(comps.pool, INTEGRITY)] == [products.id]
    with pytest.raises(DecisionError, match="no open repair proposal"):
        await approve(comps, path, sources, products.id, by="test")

    proposal = await propose(comps, sources, sources.get(products.id), sample=6)
    assert proposal.complete and proposal.id is not None and proposal.auto_approvable
    applied = await approve(comps, path, sources, products.id, by="test", comment="looks right")
    assert applied.version == 2 and applied.recleaned >= failed and applied.format_errors == 0
    assert applied.records >= failed and applied.resolved >= 1
    assert list(applied.validation) == [datetime.now(UTC).date().isoformat()]
    text = path.read_text()
    assert text.startswith("# the shop's sources\n")
    now = load_sources(path)
    assert now.get(products.id).extract.model_dump(exclude_none=True) == \
        proposal.extract_block(sources.get(products.id))
    assert [s.model_dump() for s in now.sources if s.id != products.id] == \
        [s.model_dump() for s in sources.sources if s.id != products.id]
    assert await open_alerts(comps.pool, INTEGRITY) == []
    (row,) = [r for r in await repairs.versions(comps.pool, products.id) if r.version == 2]
    assert "approved by test: looks right" in row.reason
    with pytest.raises(DecisionError, match="is approved"):
        await approve(comps, path, now, products.id, by="test")

    back = await rollback(comps, path, now, products.id, 1, by="test")
    assert back.version == 3
    assert load_sources(path).get(products.id).extract.model_dump(exclude_none=True) == old_block
    assert [v.version for v in await repairs.versions(comps.pool, products.id)] == [1, 2, 3]
    with pytest.raises(DecisionError, match="no version 9"):
        await rollback(comps, path, now, products.id, 9, by="test")


async def test_an_item_whose_task_url_has_a_session_id_is_fetched_again_by_its_canonical_url(
        comps: Components, site: tuple[SimulatorThread, list[SourceSpec]]) -> None:
    """A known item is asked for by its canonical URL, but its task may hold another form
    of it (the list page linked it with a ``;jsessionid=``): the fetch is found by the
    task's fingerprint, not the URL text. (The proposal waited its whole fetch time for
    such an item and learned from one pair fewer.)"""
    from stratacrawl.repair.propose import fetch_again

    st, specs = site
    sources = sources_for(specs)
    products = next(s for s in specs if s.kind == "products")
    source = sources.get(products.id)
    await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
    item = next(it["url"] for it in st.sim.truth()[products.id])
    canonical = canonicalize(item)
    async with comps.pool.connection() as conn:   # the task holds the session form
        await conn.execute("UPDATE tasks SET url = %s WHERE url_hash = %s",
                           (f"{canonical};jsessionid=ABC123", canonical_fingerprint(canonical)))
    pages = await fetch_again(comps, sources, source, [canonical], timeout_s=30)
    assert list(pages) == [canonical]
    assert pages[canonical][2]                       # the page's body
    async with comps.pool.connection() as conn:      # fetched by the task's own URL
        staged = await (await conn.execute(
            "SELECT count(*) FROM staging WHERE url = %s",
            (f"{canonical};jsessionid=ABC123",))).fetchone()
    assert staged is not None and staged[0] == 1
