"""A repair proposal after a silent redesign: the products source's pages still answer
200 but none of its rules finds anything; the proposal fetches known items again, learns
every field's rule from the new pages and the values their records hold, and the rules
it proposes, applied, restore the records — without a selector written by hand."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from stratacrawl.cold.tasks import NewTask
from stratacrawl.crawl import crawl
from stratacrawl.repair.propose import RepairError, propose
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.sources import SourcesFile
from stratacrawl.urls import canonical_fingerprint, canonicalize
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
