"""The demo: embedded tiers + the site simulator; every flow's work in turn — discovery and
fetch (the crawl), cleaning, validation with Data Docs, tier sinking, recovery — then a
summary of what each tier holds."""

from __future__ import annotations

import time
from collections.abc import Callable

import yaml

from stratacrawl.cold.records import record_counts
from stratacrawl.cold.staging import staged_counts
from stratacrawl.cold.url_rules import load_rules
from stratacrawl.crawl import crawl
from stratacrawl.inventory import take_inventory
from stratacrawl.redact import redact
from stratacrawl.settings import Settings
from stratacrawl.sim import SimulatorThread, build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sources import parse_sources
from stratacrawl.validate.runner import days_back
from stratacrawl.wiring import open_app


async def run_demo(settings: Settings, *, n_sources: int, seed: int,
                   out: Callable[[str], object] = print) -> str:
    t0 = time.monotonic()
    specs = build_specs(n_sources, seed)
    for spec in specs:
        spec.backlog = min(spec.backlog, 120)  # a demo-sized site
    with SimulatorThread(specs) as sim:
        for spec in specs:
            out(f"simulator: {spec.id:<12} {spec.kind:<9} {spec.base_url}")
        document = sources_document(specs, rate=100.0, concurrency=4)
        sources_file = settings.state_path / "demo-sources.yaml"
        sources_file.parent.mkdir(parents=True, exist_ok=True)
        sources_file.write_text(yaml.safe_dump(document, sort_keys=False))
        sources = parse_sources(document, str(sources_file))
        async with open_app(settings) as comps:
            ep = comps.runtime.endpoints
            out(f"tiers: redis {redact(ep.redis_url)} · elasticsearch "
                f"{redact(ep.elasticsearch_url)} · postgres {redact(ep.database_url)}")
            report = await crawl(comps, sources, until_idle=True, seconds=300, flush_s=1.0)
            truth = sim.sim.truth()
            lines = [f"crawl: {report.fetched} pages fetched in {report.seconds:.1f} s; "
                     f"{report.discovery.queued} URLs discovered; dropped links: "
                     + (", ".join(f"{k} {v}" for k, v in report.discovery.dropped.most_common(5))
                        or "none")]
            staged = await staged_counts(comps.pool)
            for spec in specs:
                items, total = staged.get(spec.id, (0, 0))
                lines.append(f"  {spec.id:<12} {total:>4} pages staged, {items:>4} item pages; "
                             f"the site has {len(truth[spec.id])} items")
            cleaned = await comps.clean(sources)
            c = cleaned.stats
            lines.append(f"cleaning: {c.pages} pages → {c.inserted} records in {c.seconds:.1f} s; "
                         f"format errors {c.format_errors}")
            records = await record_counts(comps.pool)
            for sid, st in sorted(c.sources.items()):
                per_record = staged.get(sid, (0, 0))[0] / max(records.get(sid, 0), 1)
                lines.append(f"  {sid:<12} {st.pages:>4} pages, {records.get(sid, 0):>4} "
                             f"records, {st.format_errors} format errors; {per_record:.2f} item "
                             f"pages per record")
            learned = await load_rules(comps.pool)
            lines.append("URL rules learned: " + ("; ".join(
                f"{r.source_id} {r.rule} ({r.support} pairs)" for r in learned
                if r.state == "active") or "none") + "; variants not fetched: " + ", ".join(
                f"{sid} {st.redundant}" for sid, st in sorted(report.sources.items())))
            results = await comps.validator().validate(sources.sources, days_back(1))
            checks = [ch for r in results for ch in r.checks]
            lines.append(f"validation: {sum(ch.success for ch in checks)}/{len(checks)} checks "
                         f"passed; {sum(r.success for r in results)}/{len(results)} suites pass")
            for r in results:
                failed = [ch.describe() for ch in r.checks if not ch.success]
                lines.append(f"  {r.source_id:<12} {'pass' if r.success else 'FAIL'}"
                             + (f": {'; '.join(failed)}" if failed else ""))
            lines.append(f"Data Docs: {settings.data_docs_path / 'index.html'}")
            sunk = await comps.sink(snapshot_sources=[])
            lines.append(f"tiers: {report.demoted} URL states demoted to warm by the crawl; "
                         f"sinking: {sunk.access_written_back} hot access records written back, "
                         f"{sunk.warm_deleted} warm documents past {settings.warm_retention_days} "
                         f"days, {len(sunk.indices_created)} weekly indices created ahead")
            recovered = await comps.recovery().run()
            lines.append(f"recovery: {len(recovered.steps)} steps in {recovered.seconds:.2f} s ("
                         + "; ".join(f"{st.name}: {st.result}" for st in recovered.steps) + ")")
            inv = await take_inventory(comps.runtime)
    lines += inv.lines()
    lines.append(f"sources file: {sources_file}")
    lines.append(f"demo finished in {time.monotonic() - t0:.1f} s")
    return "\n".join(lines)
