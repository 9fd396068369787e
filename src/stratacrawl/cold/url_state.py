"""The url_state table: every URL the crawler knows, its last fetch (status, validators,
content fingerprint, canonical link), its use (hits, last access) and what its copy in
warm holds (``warm_synced_at``); the warm outbox (``warm_outbox``) lists the URLs whose
last fetch warm does not have yet. The staging transaction writes the fetch columns
(``cold/staging.py``); dedup, demotion, eviction, sinking, recovery and ``lookup`` read
and write the rest through the functions here."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from stratacrawl.cold.pool import Db, connection

DEMOTION_LOCK = 0x5C_DE_30_7E  # advisory lock key: the one demoter of a cluster
OUTBOX_ENTRY = 1000  # URL hashes per outbox entry when recovery queues URLs again


# -- dedup and lookup -----------------------------------------------------------------------
async def last_crawled(db: Db, url_hashes: Sequence[str]
                       ) -> dict[str, float | None]:
    """Last crawl time (epoch seconds; None: never crawled) of each of these URLs known."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT url_hash, extract(epoch FROM last_crawled) FROM url_state "
            "WHERE url_hash = ANY(%b::uuid[])", (list(url_hashes),))
        rows = await cur.fetchall()
    return {str(h): (float(lc) if lc is not None else None) for h, lc in rows}


async def statuses(db: Db, url_hashes: Sequence[str]) -> dict[str, int]:
    """The last HTTP status of each of these URLs that was fetched."""
    if not url_hashes:
        return {}
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT url_hash, http_status FROM url_state WHERE url_hash = ANY(%b::uuid[]) "
            "AND http_status IS NOT NULL", (list(url_hashes),))
        return {str(h): int(s) for h, s in await cur.fetchall()}


async def url_facts(db: Db, url_hash: str) -> tuple[Any, ...] | None:
    """(source, URL, last crawled, status, content fingerprint, ETag, Last-Modified) of
    one URL, or None."""
    async with connection(db) as conn:
        row = await (await conn.execute(
            "SELECT source_id, url, last_crawled, http_status, content_hash, etag, "
            "last_modified FROM url_state WHERE url_hash = %s", (url_hash,))).fetchone()
    return tuple(row) if row is not None else None


async def knows_no_url(db: Db) -> bool:
    """Whether cold knows no URL at all (a new installation)."""
    async with connection(db) as conn:
        row = await (await conn.execute("SELECT EXISTS (SELECT 1 FROM url_state)")).fetchone()
    return row is not None and not row[0]


# -- recovery -------------------------------------------------------------------------------
ALL_FINGERPRINTS_RAW = "SELECT uuid_send(url_hash) FROM url_state"   # bytea: 16 bytes each

@contextlib.asynccontextmanager
async def all_url_hashes(db: Db, chunk: int
                         ) -> AsyncIterator[AsyncIterator[bytes]]:
    """Every URL fingerprint cold knows, ``chunk`` at a time (a server-side cursor), each
    chunk the fingerprints' 16 raw bytes one after the other (no string per URL: a
    rebuild of the Bloom filter reads every known URL)."""
    async with (connection(db) as conn, conn.transaction(),
                conn.cursor(name="url_hashes", binary=True) as cur):
        await cur.execute(ALL_FINGERPRINTS_RAW)

        async def chunks() -> AsyncIterator[bytes]:
            while rows := await cur.fetchmany(chunk):
                yield b"".join(r[0] for r in rows)

        yield chunks()


async def synced_per_week(db: Db, retention: timedelta) -> dict[str, int]:
    """URLs marked synced to warm per ISO week of their last crawl (``IYYYIW``), within
    the warm retention: what each weekly warm index should hold."""
    async with connection(db) as conn:
        rows = await (await conn.execute(
            "SELECT to_char(last_crawled AT TIME ZONE 'UTC', 'IYYYIW') AS week, count(*) "
            "FROM url_state WHERE warm_synced_at IS NOT NULL AND last_crawled IS NOT NULL "
            "AND GREATEST(last_access, last_crawled) >= now() - %s GROUP BY 1",
            (retention,))).fetchall()
    return {str(week): int(n) for week, n in rows}


async def outbox_urls(db: Db) -> int:
    """How many URLs the warm outbox holds (committed fetches and re-index work that warm
    has not got yet)."""
    async with connection(db) as conn:
        row = await (await conn.execute(
            "SELECT COALESCE(sum(cardinality(url_hashes)), 0) FROM warm_outbox")).fetchone()
    return int(row[0]) if row else 0


async def unsync_weeks(db: Db, weeks: Sequence[str]) -> None:
    """Mark these weeks' URLs not in warm and queue them in the warm outbox (demotion
    indexes them again)."""
    async with connection(db) as conn:
        await conn.execute(
            "WITH unsynced AS (UPDATE url_state SET warm_synced_at = NULL "
            "WHERE warm_synced_at IS NOT NULL AND last_crawled IS NOT NULL "
            "AND to_char(last_crawled AT TIME ZONE 'UTC', 'IYYYIW') = ANY(%b) "
            "RETURNING url_hash, last_crawled) "
            "INSERT INTO warm_outbox (url_hashes) SELECT array_agg(url_hash ORDER BY n) "
            "FROM (SELECT url_hash, row_number() OVER (ORDER BY last_crawled) - 1 AS n "
            "FROM unsynced) r GROUP BY n / %s ORDER BY min(n)", (list(weeks), OUTBOX_ENTRY))


# -- demotion (cold → warm) -----------------------------------------------------------------
@contextlib.asynccontextmanager
async def demotion_lock(db: Db) -> AsyncIterator[bool]:
    """Whether this process holds the cluster's demotion lock (held while in the block)."""
    async with connection(db) as lock:
        row = await (await lock.execute("SELECT pg_try_advisory_lock(%s)",
                                        (DEMOTION_LOCK,))).fetchone()
        got = bool(row and row[0])
        try:
            yield got
        finally:
            if got:
                await lock.execute("SELECT pg_advisory_unlock(%s)", (DEMOTION_LOCK,))


def outbox_head(where: str = "true") -> str:
    """SQL of the first outbox entries matching ``where`` (parameters: those of ``where``,
    then the limit twice), one row per URL hash in queue order: (entry id, url_hash). Whole
    entries only, until they hold ``limit`` hashes (the last may go past it): an entry is
    consumed whole. Every entry holds a hash, so ``limit`` entries always suffice."""
    return ("SELECT e.id, x.url_hash, x.n FROM (SELECT id, url_hashes, sum(cardinality("
            "url_hashes)) OVER (ORDER BY id) - cardinality(url_hashes) AS before FROM "
            f"(SELECT id, url_hashes FROM warm_outbox WHERE {where} ORDER BY id LIMIT %s) f) e, "
            "unnest(e.url_hashes) WITH ORDINALITY AS x(url_hash, n) WHERE e.before < %s")


async def unsynced(db: Db, limit: int) -> list[tuple[Any, ...]]:
    """The URLs of the next warm outbox entries, about ``limit`` of them (whole entries),
    oldest first: (outbox entry id, url hash, source, URL, ETag, Last-Modified, content
    fingerprint, status, length, last crawled, retry count, last use) of URLs whose
    last fetch is not in warm yet. A URL fetched twice since the last demotion is there
    twice, both times with its current state; a URL cold does not hold (any more) comes
    with the URL hash None. Fewer than ``limit`` URLs: the outbox is drained."""
    async with connection(db) as conn:
        return list(await (await conn.execute(
            "SELECT o.id, u.url_hash, u.source_id, u.url, u.etag, u.last_modified, "
            "u.content_hash, u.http_status, u.content_length, u.last_crawled, "
            "u.retry_count, GREATEST(u.last_access, u.last_crawled) "
            f"FROM ({outbox_head()}) o LEFT JOIN url_state u USING (url_hash) "
            "ORDER BY o.id, o.n", (limit, limit))).fetchall())


async def mark_synced(db: Db, synced: Sequence[tuple[str, datetime]],
                      outbox_ids: Sequence[int]) -> None:
    """(url hash, the last_crawled that was indexed) pairs now in warm, and the outbox
    entries done (one transaction)."""
    async with connection(db) as conn, conn.transaction():
        await conn.execute(
            "UPDATE url_state u SET warm_synced_at = v.at FROM (SELECT unnest(%b::uuid[]) AS h, "
            "unnest(%b::timestamptz[]) AS at) v WHERE u.url_hash = v.h "
            "AND u.url_hash = ANY(%b::uuid[])",
            ([h for h, _ in synced], [at for _, at in synced], [h for h, _ in synced]))
        await conn.execute("DELETE FROM warm_outbox WHERE id = ANY(%b::bigint[])", (list(outbox_ids),))


# -- eviction and sinking -------------------------------------------------------------------
async def write_access(db: Db, fps: list[str], hits: list[int],
                       last_access: list[float]) -> int:
    """Hot hit counts and last access times → cold ``url_state`` (never backwards)."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "UPDATE url_state u SET hits = GREATEST(u.hits, v.h), "
            "last_access = GREATEST(u.last_access, to_timestamp(v.la)) FROM (SELECT "
            "unnest(%b::uuid[]) AS fp, unnest(%b::int[]) AS h, unnest(%b::float8[]) AS la) v "
            "WHERE u.url_hash = v.fp", (fps, hits, last_access))
        return cur.rowcount


async def last_used(db: Db, url_hashes: Sequence[str]
                    ) -> dict[str, datetime]:
    """The later of last access and last crawl of each of these URLs cold holds."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT url_hash, GREATEST(last_access, last_crawled) FROM url_state "
            "WHERE url_hash = ANY(%b::uuid[])", (list(url_hashes),))
        return {str(h): at for h, at in await cur.fetchall()}
