"""efficiency: how many fetches bring nothing new.

``fetches_per_new_item``: a simulated day (the simulator's clock at ``SPEED`` x, the
sources' cadence and ``max_interval`` scaled alike) of 8 sources that publish every 5 min,
15 min, 30 min, 1 h, 2 h, 4 h, 8 h and 24 h, crawled twice side by side in one crawl: once
with adaptive re-crawl, once (a copy of each source on its own host) at the fixed cadence
of 10 min. Figure: every fetch of the day's last ``WINDOW`` share divided by the new items
it found; baseline: the same for the fixed-cadence copies. ``freshness_lag_p50_s``: an
item's publication to its first fetch, in simulated seconds (cleaning comes after and
does not depend on the schedule). At 720x (a day in 2 minutes) a second of the
pipeline's own latency is 12 simulated minutes, more than the schedule's part of the lag;
the ``_60x`` figures are the same day at 60x (24 minutes; ``--quick``: 3 hours of it),
where the policy, not the pipeline, sets the lag.

``dup_fetch_ratio``: a full crawl of 20 simulated sources of 1,000 items each, whose list
pages link ~22 % of the items under a second URL (``?ref=N``, ``/index.html``) next to the
canonical one the sitemap gives; item fetches whose content equals an item page already
fetched for the same source, divided by the distinct items. Baseline: the same crawl
with URL-rule learning off (``url_rules: {learn: false}``), in the same run. The sources
are crawled politely (50 requests/s each), as a real site would be.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from bench.site import simulated_site
from stratacrawl.cold.url_rules import load_rules
from stratacrawl.crawl import crawl
from stratacrawl.process.tuning import tune_crawl_process
from stratacrawl.sim import SimulatorThread, build_specs
from stratacrawl.sim.content import published_at
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sources import parse_sources

FIGURES = ("fetches_per_new_item", "freshness_lag_p50_s", "fetches_per_new_item_60x",
           "freshness_lag_p50_s_60x", "dup_fetch_ratio")

SOURCES = 20
RATE = 50.0
SPEED = 720.0                           # a simulated day in 120 s
SLOW_SPEED = 60.0                       # ... and in 24 minutes
PUBLISH_EVERY_MIN = (5, 15, 30, 60, 120, 240, 480, 1440)
CADENCE_S, MAX_INTERVAL_S = 600.0, 6 * 3600.0
WINDOW = 0.8                            # the share of the day counted (after the backlog)
_ITEM_K = re.compile(r"/(?:article|product|api/prices)/(\d+)")


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


def _day_sites(t0: datetime) -> list[Any]:
    """The 8 sources twice: adaptive copies on 127.0.0.190+, fixed-cadence ones on 200+."""
    specs = []
    for first_host, suffix in ((190, ""), (200, "-fixed")):
        for spec, every in zip(build_specs(len(PUBLISH_EVERY_MIN), 5, first_host=first_host,
                                           epoch=t0), PUBLISH_EVERY_MIN, strict=True):
            spec.id += suffix
            spec.backlog = 20                 # one list page at the start
            spec.publish_every_s = every * 60.0
            specs.append(spec)
    return specs


async def _recrawl_day(specs: list[Any], day_s: float, sim_start: float,
                       speed: float) -> dict[str, Any]:
    """``sim_start``: when the simulator's clock stood at the sites' epoch (epoch seconds)."""
    doc = sources_document(specs, rate=RATE, concurrency=2)
    for entry in doc["sources"]:
        entry.update(cadence=f"{CADENCE_S / speed}s", url_rules={"learn": True}, recrawl={
            "adaptive": not entry["id"].endswith("-fixed"),
            "max_interval": f"{MAX_INTERVAL_S / speed}s"})
    sources = parse_sources(doc)
    with bench_runtime("efficiency") as rt:
        async with bench_components(rt) as c:
            t0 = time.time()
            await crawl(c, sources, until_idle=False, seconds=day_s, flush_s=0.3)
            async with c.pool.connection() as conn:
                rows = await (await conn.execute(
                    "SELECT source_id, kind, url, extract(epoch FROM fetched_at) FROM staging "
                    "WHERE status IS NOT NULL")).fetchall()
    counted_from = t0 + day_s * (1 - WINDOW)
    by_id = {s.id: s for s in specs}
    out: dict[str, Any] = {}
    for fixed in (False, True):
        fetches, first = 0, {}
        for sid, kind, url, at in rows:
            if sid.endswith("-fixed") != fixed:
                continue
            fetches += float(at) >= counted_from
            m = _ITEM_K.search(url) if kind == "item" else None
            if m:
                first[(sid, int(m.group(1)))] = min(float(at), first.get((sid, int(m.group(1))),
                                                                      float(at)))
        lags, new_items = [], 0
        by_rate: dict[int, list[float]] = {}
        for (sid, k), at in first.items():
            spec = by_id[sid]
            if at < counted_from or k < spec.backlog:
                continue
            new_items += 1
            published = sim_start + (published_at(spec, k) - spec.epoch).total_seconds() / speed
            lags.append(max(0.0, at - published) * speed)
            by_rate.setdefault(int(spec.publish_every_s // 60), []).append(lags[-1])
        out["fixed" if fixed else "adaptive"] = {
            "fetches": fetches, "new_items": new_items,
            "fetches_per_new_item": fetches / max(new_items, 1),
            "freshness_lag_p50_s": round(statistics.median(lags), 1) if lags else None,
            "freshness_lag_p90_s": round(statistics.quantiles(lags, n=10)[-1], 1)
            if len(lags) >= 10 else None,
            "lag_p50_s_by_publish_every_min": {m: round(statistics.median(v), 1)
                                               for m, v in sorted(by_rate.items())}}
    return out


def recrawl_day(size: Size = "full", speed: float = SPEED, suffix: str = "") -> Iterator[Figure]:
    hours = (sized(size, smoke=1.0, quick=6.0, full=24.0) if speed == SPEED
             else sized(size, smoke=0.1, quick=3.0, full=24.0))
    day_s = hours * 3600 / speed
    t0 = datetime.now(UTC)
    specs = _day_sites(t0)
    with SimulatorThread(specs, clock=lambda: t0 + (datetime.now(UTC) - t0) * speed):
        day = uvloop.run(_recrawl_day(specs, day_s, t0.timestamp(), speed))
    adaptive, fixed = day["adaptive"], day["fixed"]
    yield Figure("efficiency", f"fetches_per_new_item{suffix}", adaptive["fetches_per_new_item"],
                 "", fixed["fetches_per_new_item"], "the same sources at the fixed cadence",
                 extra={"speed": speed, "simulated_s": day_s * speed,
                        "publish_every_min": PUBLISH_EVERY_MIN, "adaptive": adaptive,
                        "fixed": fixed})
    yield Figure("efficiency", f"freshness_lag_p50_s{suffix}",
                 adaptive["freshness_lag_p50_s"] or 0.0, "s", fixed["freshness_lag_p50_s"],
                 "the same sources at the fixed cadence", extra={"speed": speed})


def duplicate_fetches(size: Size = "full") -> Iterator[Figure]:
    n, backlog = sized(size, smoke=(2, 60), quick=(5, 300), full=(SOURCES, 1000))
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


def run(size: Size = "full") -> Iterator[Figure]:
    yield from recrawl_day(size)
    yield from recrawl_day(size, SLOW_SPEED, "_60x")
    yield from duplicate_fetches(size)
