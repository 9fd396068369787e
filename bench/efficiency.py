"""efficiency: how many fetches bring nothing new.

``dup_fetch_ratio``: a full crawl of 20 simulated sources of 1,000 items each, whose list
pages link ~22 % of the items under a second URL (``?ref=N``, ``/index.html``) next to the
canonical one the sitemap gives; item fetches whose content equals an item page already
fetched for the same source, divided by the distinct items. Baseline: the same crawl
with URL-rule learning off (``url_rules: {learn: false}``), in the same run. The sources
are crawled politely (50 requests/s each), as a real site would be.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import uvloop

from bench.figure import Figure
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.cold.url_rules import load_rules
from stratacrawl.crawl import crawl
from stratacrawl.sources import parse_sources
from stratacrawl.tuning import tune_crawl_process

SOURCES = 20
RATE = 50.0


async def _crawl(site: Any, learn: bool) -> dict[str, Any]:
    sources = parse_sources({"sources": [
        {**s.model_dump(mode="json"), "rate": RATE, "batch_size": 10,
         "url_rules": {"learn": learn}} for s in site.sources]})
    tune_crawl_process()
    with bench_runtime("efficiency") as rt:
        async with bench_components(rt) as c:
            report = await crawl(c, sources, until_idle=True, seconds=600)
            async with c.pool.connection() as conn:
                rows = await (await conn.execute(
                    "SELECT u.source_id, count(*) - count(DISTINCT u.content_hash), "
                    "count(DISTINCT u.content_hash) FROM url_state u JOIN tasks t "
                    "USING (url_hash) WHERE t.kind = 'item' AND u.http_status = 200 "
                    "GROUP BY 1")).fetchall()
            rules = await load_rules(c.pool)
    dups = sum(int(r[1]) for r in rows)
    items = sum(int(r[2]) for r in rows)
    return {"ratio": dups / max(items, 1), "duplicate_fetches": dups, "items": items,
            "seconds": round(report.seconds, 1), "pages": report.fetched,
            "redundant_claims": sum(s.redundant for s in report.sources.values()),
            "active_rules": sorted({r.rule for r in rules if r.state == "active"}),
            "revoked_rules": sorted({r.rule for r in rules if r.state == "revoked"})}


def run(quick: bool = False) -> Iterator[Figure]:
    n, backlog = (5, 300) if quick else (SOURCES, 1000)
    epoch = datetime.now(UTC).isoformat()   # sites of `backlog` items, a crawl finishes them
    with simulated_site(n, 7, first_host=60, backlog=backlog, epoch=epoch) as (_, sources):
        learned = uvloop.run(_crawl(sources, learn=True))
    with simulated_site(n, 7, first_host=60, backlog=backlog, epoch=epoch) as (_, sources):
        static = uvloop.run(_crawl(sources, learn=False))
    # lower is better: ratio = with learning / without
    yield Figure("efficiency", "dup_fetch_ratio", learned["ratio"], "",
                 static["ratio"], "the same crawl without URL-rule learning",
                 extra={"sources": n, "items_per_source": backlog, "learning": learned,
                        "no_learning": static})
