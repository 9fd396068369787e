"""The sessions table: each source's cookie jar as a worker left it (the durable copy of
the hot ``cookies`` key), so a restarted crawl resumes a site's session."""

from __future__ import annotations

from collections.abc import Sequence

from stratacrawl.cold.pool import Db, connection

SESSION_HOURS = 1   # a stored session is offered back for this long


async def save_sessions(db: Db,
                        jars: Sequence[tuple[str, str, str]]) -> None:
    """Upsert (source, session id, cookie jar as JSON) rows."""
    if not jars:
        return
    async with connection(db) as conn:
        await conn.cursor().executemany(
            "INSERT INTO sessions (source_id, session_id, cookies, expires_at) VALUES "
            f"(%s, %s, %s::jsonb, now() + interval '{SESSION_HOURS} hour') ON CONFLICT "
            "(source_id, session_id) DO UPDATE SET cookies = EXCLUDED.cookies, last_used_at = "
            "now(), expires_at = EXCLUDED.expires_at, closed_at = now()", jars)


async def unexpired_sessions(db: Db) -> list[tuple[str, str, float]]:
    """(source, cookie jar as JSON, seconds left) of each source's newest unexpired session."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT DISTINCT ON (source_id) source_id, cookies::text, "
            "extract(epoch FROM expires_at - now()) FROM sessions "
            "WHERE expires_at > now() ORDER BY source_id, last_used_at DESC")
        return [(str(s), str(c), float(t)) for s, c, t in await cur.fetchall()]
