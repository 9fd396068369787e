"""The demo: embedded tiers + the site simulator, a whole crawl, then what each tier holds."""

from __future__ import annotations

import time
from collections.abc import Callable

import yaml

from stratacrawl.crawl import crawl
from stratacrawl.inventory import take_inventory
from stratacrawl.session import open_session
from stratacrawl.settings import Settings
from stratacrawl.sim import SimulatorThread, build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sources import parse_sources


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
        async with open_session(settings) as comps:
            ep = comps.runtime.endpoints
            out(f"tiers: redis {ep.redis_url} · elasticsearch {ep.elasticsearch_url} · "
                f"postgres {ep.database_url}")
            report = await crawl(comps, sources, until_idle=True, seconds=300, flush_s=1.0)
            truth = sim.sim.truth()
            lines = [f"crawl: {report.fetched} pages fetched in {report.seconds:.1f} s; "
                     f"{report.discovery.queued} URLs discovered; dropped links: "
                     + (", ".join(f"{k} {v}" for k, v in report.discovery.dropped.most_common(5))
                        or "none")]
            async with comps.pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT source_id, count(*) FILTER (WHERE clean_state = 'new'), count(*) "
                    "FROM staging GROUP BY 1 ORDER BY 1")
                staged = {s: (items, total) for s, items, total in await cur.fetchall()}
            for spec in specs:
                items, total = staged.get(spec.id, (0, 0))
                lines.append(f"  {spec.id:<12} {total:>4} pages staged, {items:>4} item pages; "
                             f"the site has {len(truth[spec.id])} items")
            inv = await take_inventory(comps.runtime)
    lines += inv.lines()
    lines.append(f"sources file: {sources_file}")
    lines.append(f"demo finished in {time.monotonic() - t0:.1f} s")
    return "\n".join(lines)
