"""tier-sinking (nightly): warm → cold after the retention, hot access written back, empty
weekly indices dropped and next weeks created, staging retention with snapshots, finished
item tasks retired from the ledger; hot eviction when Redis is over its budget."""

from __future__ import annotations

from prefect import flow

from flows.common import figures, load_settings, publish_table, step
from stratacrawl.sources import snapshot_source_ids
from stratacrawl.tiers.eviction import evict_hot
from stratacrawl.wiring import open_app


@flow(name="tier-sinking", log_prints=True)
async def tier_sinking(sources_file: str | None = None) -> dict[str, int]:
    async with open_app(await load_settings(sources=sources_file)) as comps:
        s = comps.settings
        snapshots = snapshot_source_ids(s.sources)
        r = await comps.sink(snapshots, run=step)  # a task run per step
        ev = await step("hot eviction", lambda: evict_hot(comps.redis, comps.pool,
                                                          budget_mb=s.hot_budget_mb))
    summary = {"demoted": r.demoted.rows, "access_written_back": r.access_written_back,
               "warm_deleted": r.warm_deleted, "warm_refreshed": r.warm_refreshed,
               "indices_dropped": len(r.indices_dropped),
               "indices_created": len(r.indices_created),
               "staging_partitions_dropped": len(r.staging_dropped),
               "snapshot_rows": r.snapshot_rows, "tasks_retired": r.tasks_retired,
               "hot_evicted": ev.evicted}
    await publish_table("stratacrawl-tier-sinking", "Tier sinking", figures({
        **summary, "hot_mb_before": round(ev.used_before_mb, 1),
        "hot_mb_after": round(ev.used_after_mb, 1),
        **{f"seconds: {name}": round(sec, 2) for name, sec in r.steps.items()}}))
    return summary
