"""Demotion: committed fetches' URL state and page metadata go to warm, in bulk.

Cold's warm outbox lists the URLs whose last fetch has not reached warm yet: the staging
transaction appends an entry per source with the hashes of the URLs it fetched; demotion
indexes the URLs' current state and removes the entries it indexed
(``url_state.warm_synced_at`` records the crawl time warm holds). A crawl demotes for up
to ``end_demotion_s`` at its end (and every ``demote_every_s`` while it runs, if set); the
``demotion`` deployment demotes the rest. When Elasticsearch is down the outbox simply
grows and the sinking or recovery flow backfills later — the crawl never waits for warm.
Documents go to the weekly index of their crawl time, ``_id`` = URL hash, so re-demoting
the same state is idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.url_state import demotion_lock, mark_synced, unsynced
from stratacrawl.warm.store import WarmStore

log = logging.getLogger(__name__)


@dataclass
class DemoteStats:
    docs: int = 0
    rows: int = 0
    error: str | None = None
    busy: bool = False   # another process was demoting: this one left it to it


async def demote(pool: AsyncConnectionPool, warm: WarmStore,
                 *, limit: int = 5000, max_rounds: int | None = None) -> DemoteStats:
    """Index unsynced URL state in warm until none is left (or ``max_rounds`` batches);
    an Elasticsearch failure stops the run and leaves the watermark where it was.

    One process demotes at a time (a PostgreSQL advisory lock): crawl workers ending
    together and the deployment all demote, and without the lock each indexed the same
    rows again."""
    async with demotion_lock(pool) as got:
        if not got:
            return DemoteStats(busy=True)
        return await _demote(pool, warm, limit, max_rounds)


async def _demote(pool: AsyncConnectionPool, warm: WarmStore, limit: int,
                  max_rounds: int | None) -> DemoteStats:
    stats = DemoteStats()
    rounds = 0
    while max_rounds is None or rounds < max_rounds:
        rounds += 1
        entries = await unsynced(pool, limit)
        if not entries:
            break
        latest = {e[1]: e[1:] for e in entries if e[1] is not None}  # each URL once
        actions = [doc for row in latest.values() for doc in warm.docs(row)]
        try:
            ok, failed = await warm.index(actions)
        except Exception as e:  # warm is down: backfill later from the watermark
            stats.error = f"{type(e).__name__}: {e}"
            log.warning("demotion: warm tier unavailable, will backfill: %s", e)
            break
        synced = [(h, row[8]) for h, row in latest.items() if h not in failed]
        # An entry is done when all its URLs are in warm; one refused keeps it queued.
        kept = {e[0] for e in entries if e[1] in failed}
        await mark_synced(pool, synced, sorted({e[0] for e in entries} - kept))
        stats.docs += ok
        stats.rows += len(synced)
        if failed:
            stats.error = f"{len(failed)} document(s) refused by Elasticsearch"
            break
        if len(entries) < limit:
            break
    return stats
