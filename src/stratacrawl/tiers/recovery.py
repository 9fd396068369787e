"""Recovery: idempotent, safe at any time, each step timed.

Cold is the truth; hot and warm are rebuilt from it. Order matters for how fast work
resumes: leases and ready queues first (fetching resumes), then sessions and the spool,
then the Bloom filter (streamed from cold; dedup takes the exact path until it is marked
ready, so it is never wrong meanwhile), then warm wherever it holds less than cold expects.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from stratacrawl.components import Components
from stratacrawl.fetch.sessions import restore_sessions
from stratacrawl.frontier.runs import DEAD_AFTER
from stratacrawl.staging.loader import drain
from stratacrawl.staging.spool import Spool
from stratacrawl.steps import StepRunner, run_directly
from stratacrawl.tiers.demotion import demote

BLOOM_CHUNK = 100_000


@dataclass
class StepResult:
    name: str
    seconds: float
    result: str


@dataclass
class RecoveryReport:
    steps: list[StepResult] = field(default_factory=list)
    resumed_after_s: float = 0.0     # ready queues rebuilt: fetching can resume
    seconds: float = 0.0

    def lines(self) -> list[str]:
        return [f"{s.name}: {s.result} ({s.seconds:.2f} s)" for s in self.steps]


async def sources_with_ready_work(comps: Components) -> list[str]:
    """Distinct sources with ready tasks by a skip scan of the ready index (one
    probe per source, not a scan of millions of tasks)."""
    async with comps.pool.connection() as conn:
        cur = await conn.execute(
            "WITH RECURSIVE s AS ((SELECT source_id FROM tasks WHERE state IN ('PENDING', "
            "'RETRY_WAIT') ORDER BY source_id LIMIT 1) UNION ALL SELECT (SELECT t.source_id "
            "FROM tasks t WHERE t.state IN ('PENDING', 'RETRY_WAIT') AND t.source_id > s.source_id "
            "ORDER BY t.source_id LIMIT 1) FROM s WHERE s.source_id IS NOT NULL) "
            "SELECT source_id FROM s WHERE source_id IS NOT NULL")
        return [str(r[0]) for r in await cur.fetchall()]


async def rebuild_queues(comps: Components) -> int:
    queued = 0
    for source_id in await sources_with_ready_work(comps):
        queued += await comps.frontier.refill(source_id, force=True)
    return queued


async def rebuild_bloom(comps: Components) -> int:
    """Every URL cold knows, streamed into the filter; then the filter is marked ready."""
    if await comps.bloom.is_ready():
        return 0
    added = 0
    async with (comps.pool.connection() as conn, conn.transaction(),
                conn.cursor(name="bloom_rebuild") as cur):
        await cur.execute("SELECT url_hash FROM url_state")
        while rows := await cur.fetchmany(BLOOM_CHUNK):
            await comps.bloom.check_and_add([r[0] for r in rows])
            added += len(rows)
    await comps.bloom.mark_ready()
    return added


async def reindex_warm(comps: Components) -> str:
    """Warm is rebuilt from cold wherever it holds less than cold says it should: per
    weekly index, the documents warm counts against the rows cold marked synced for that
    week and still within the warm retention (older ones sank to cold on purpose). A week
    that came up short — an embedded API server restarted empty, an index lost or wiped
    while a crawl went on — is re-indexed from cold (by ``_id``: idempotent)."""
    layout = comps.runtime.layout
    family = layout.alias("url_dedup")
    retention = timedelta(days=comps.runtime.settings.warm_retention_days)
    try:
        await comps.es.indices.refresh(index=f"{family}-*", ignore_unavailable=True,
                                       allow_no_indices=True)
        agg = await comps.es.search(index=f"{family}-*", size=0, ignore_unavailable=True,
                                    allow_no_indices=True,
                                    aggs={"weeks": {"terms": {"field": "_index", "size": 1000}}})
    except Exception as e:
        return f"warm unavailable ({type(e).__name__}); backfill later"
    in_warm = {b["key"].rsplit("-", 1)[-1]: int(b["doc_count"])
               for b in agg.get("aggregations", {}).get("weeks", {}).get("buckets", [])}
    async with comps.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT to_char(last_crawled AT TIME ZONE 'UTC', 'IYYYIW') AS week, count(*) "
            "FROM url_state WHERE warm_synced_at IS NOT NULL AND last_crawled IS NOT NULL "
            "AND GREATEST(last_access, last_crawled) >= now() - %s GROUP BY 1",
            (retention,))).fetchall()
        short = sorted(week for week, expected in rows if in_warm.get(week, 0) < expected)
        if not short:
            return f"warm holds {sum(in_warm.values())} documents, as cold expects"
        await conn.execute(
            "UPDATE url_state SET warm_synced_at = NULL WHERE warm_synced_at IS NOT NULL "
            "AND last_crawled IS NOT NULL "
            "AND to_char(last_crawled AT TIME ZONE 'UTC', 'IYYYIW') = ANY(%s)", (short,))
    stats = await demote(comps.pool, comps.es, layout)
    return (f"re-indexed {stats.rows} URLs of {len(short)} short week(s) "
            f"({', '.join(short)})" + (f" ({stats.error})" if stats.error else ""))


async def recover(comps: Components, run: StepRunner = run_directly) -> RecoveryReport:
    """Run every step (each through ``run``: a task run of its own in a flow); see the
    module docstring."""
    report = RecoveryReport()
    t0 = time.monotonic()

    async def step(name: str, fn: Callable[[], Awaitable[Any]],
                   describe: Callable[[Any], str]) -> None:
        s0 = time.monotonic()
        result = await run(name, fn)
        report.steps.append(StepResult(name, time.monotonic() - s0, describe(result)))

    await step("reclaim expired leases",  # and those of runs that stopped beating
               lambda: comps.frontier.reclaim(dead_after=DEAD_AFTER), lambda n: f"{n} tasks")
    await step("rebuild hot ready queues", lambda: rebuild_queues(comps), lambda n: f"{n} tasks")
    report.resumed_after_s = time.monotonic() - t0
    await step("restore sessions", lambda: restore_sessions(comps.redis, comps.pool),
               lambda n: f"{n} sources")
    spool = Spool.of_state(comps.runtime.settings.state_path)
    await step("drain spool", lambda: drain(spool, comps.pool, comps.ledger),
               lambda r: f"{r.rows} rows from {r.files} files")
    await step("rebuild Bloom filter", lambda: rebuild_bloom(comps),
               lambda n: f"{n} URLs" if n else "already complete")
    await step("re-index warm where short of cold", lambda: reindex_warm(comps), str)
    report.seconds = time.monotonic() - t0
    return report
