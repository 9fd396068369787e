"""URL equivalence rules in the cold tier (``url_rules``), the fetched pages they are
learned from (``url_state``: each URL's last content fingerprint and declared canonical
link), and the counts of canonical links used or ignored (``url_rule_canonicals``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from stratacrawl.cold.pool import Db, connection
from stratacrawl.cold.url_state import outbox_head

REDUNDANT_PREFIX = "redundant: "   # a task's last_error when a rule made it redundant
HELD_PREFIX = "held: variant of "  # ... when it waits for its rule to be decided


@dataclass(frozen=True)
class RuleRow:
    source_id: str
    rule: str
    state: str                 # candidate, active, revoked
    support: int
    counterexamples: int
    example: str | None
    first_seen: datetime
    last_seen: datetime
    revoked_at: datetime | None


async def load_rules(db: Db, source_id: str | None = None) -> list[RuleRow]:
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, rule, state, support, counterexamples, example, first_seen, "
            "last_seen, revoked_at FROM url_rules WHERE %s::text IS NULL OR source_id = %s "
            "ORDER BY source_id, state, support DESC, rule", (source_id, source_id))
        return [RuleRow(*row) for row in await cur.fetchall()]


async def release_held(db: Db, source_ids: Sequence[str]) -> set[str]:
    """The sources' variants held back until their URL rules are decided: due now.
    Returns the sources that had any."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "UPDATE tasks SET due_at = now(), updated_at = now() WHERE source_id = ANY(%s) "
            "AND state = 'PENDING' AND due_at > now() AND starts_with(last_error, %s) "
            "RETURNING source_id", (list(source_ids), HELD_PREFIX))
        return {str(s) for (s,) in await cur.fetchall()}


async def save_rules(db: Db, source_id: str,
                     rows: Sequence[tuple[str, str, int, int, str | None]]) -> list[str]:
    """Upsert (rule, state, support, counterexamples, example) rows. Evidence only grows
    (a miner that restarted sees less for a while): an active rule stays active, and a
    rule once revoked stays revoked — the tasks it had made redundant are due again.
    When a rule turns active or revoked, the source's variants held back until their
    rules are decided are due at once. Returns the rules revoked now."""
    if not rows:
        return []
    async with connection(db) as conn, conn.transaction():
        cur = await conn.execute(
            "WITH v AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::int[], %b::int[], "
            "%b::text[]) AS v(rule, state, support, counterexamples, example)), "
            "old AS (SELECT rule, state FROM url_rules WHERE source_id = %s) "
            "INSERT INTO url_rules AS r (source_id, rule, state, support, counterexamples, "
            "example, revoked_at) SELECT %s, v.rule, v.state, v.support, v.counterexamples, "
            "v.example, CASE WHEN v.state = 'revoked' THEN now() END FROM v "
            "ON CONFLICT (source_id, rule) DO UPDATE SET "
            "state = CASE WHEN 'revoked' IN (r.state, excluded.state) THEN 'revoked' "
            "WHEN r.state = 'active' THEN 'active' ELSE excluded.state END, "
            "support = GREATEST(r.support, excluded.support), "
            "counterexamples = GREATEST(r.counterexamples, excluded.counterexamples), "
            "example = COALESCE(excluded.example, r.example), last_seen = now(), "
            "revoked_at = COALESCE(r.revoked_at, excluded.revoked_at) "
            "RETURNING r.rule, r.state, (SELECT o.state FROM old o WHERE o.rule = r.rule)",
            ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows],
             [r[3] for r in rows], [r[4] for r in rows], source_id, source_id))
        changed = [(rule, state) for rule, state, before in await cur.fetchall()
                   if state != before]
        revoked = [rule for rule, state in changed if state == "revoked"]
        if any(state in ("active", "revoked") for _, state in changed):
            await release_held(conn, [source_id])   # a rule decided: due now, not in a while
        if revoked:
            await conn.execute(
                "UPDATE tasks SET state = 'PENDING', due_at = now(), last_error = NULL, "
                "finished_at = NULL, updated_at = now() WHERE source_id = %s AND "
                "state = 'REDUNDANT' AND last_error = ANY(%b)",
                (source_id, [REDUNDANT_PREFIX + r for r in revoked]))
        return revoked


FetchedPage = tuple[str, str, datetime, str | None]


def _canonical(alias: str) -> str:
    """A page's declared rel=canonical: stored as '' when it names the page itself."""
    return (f"CASE {alias}canonical_url WHEN '' THEN {alias}url "
            f"ELSE {alias}canonical_url END")


# A source's outbox entries after a cursor, but those of the given writers (an entry
# written before writers were recorded has none, and is read).
_OTHERS_AFTER = "source_id = %s AND id > %s AND COALESCE(writer <> ALL(%s::text[]), true)"


async def fetched_pages(db: Db, source_id: str, cursor: int | None,
                        limit: int, *, skip_writers: Sequence[str] = ()
                        ) -> tuple[list[FetchedPage], int | None]:
    """(URL, content fingerprint, last crawled, declared canonical URL) of the source's
    pages fetched with 200 since ``cursor`` (oldest first), and the cursor to go on from.

    No index covers ``url_state``'s source and crawl time (it would make every fetch's
    URL-state update non-HOT), so reading "fetched since" there is a scan of the whole
    table: done once, on the first read (``cursor`` None: the newest ``limit`` pages).
    After that, the pages come from ``warm_outbox``, the append-only feed of URL-state
    changes: the source's entries after ``cursor`` (whole entries, about ``limit`` pages),
    by key, except those the processes ``skip_writers`` wrote (a miner already holds its
    own process's pages); the cursor then moves past the skipped entries too. A sample,
    not a ledger: entries the demoter consumed before a read are not seen."""
    async with connection(db) as conn:
        if cursor is None:
            row = await (await conn.execute(
                "SELECT max(id) FROM warm_outbox WHERE source_id = %s", (source_id,))).fetchone()
            cur = await conn.execute(
                f"SELECT url, content_hash, last_crawled, {_canonical('')} FROM url_state "
                "WHERE source_id = %s AND http_status = 200 AND content_hash IS NOT NULL "
                "AND last_crawled IS NOT NULL ORDER BY last_crawled DESC LIMIT %s",
                (source_id, limit))
            pages = [(u, h, t, c) for u, h, t, c in await cur.fetchall()]
            return pages[::-1], int(row[0]) if row and row[0] is not None else 0
        # (the last entry read, whether the read stopped at ``limit``, the source's last
        # entry of all: with fewer than ``limit`` read, every entry up to it was seen)
        cur = await conn.execute(
            f"WITH o AS ({outbox_head(_OTHERS_AFTER)}) "
            "SELECT (SELECT max(id) FROM o), (SELECT count(*) FROM o) >= %s, "
            "(SELECT max(id) FROM warm_outbox WHERE source_id = %s), u.url, u.content_hash, "
            f"u.last_crawled, {_canonical('u.')} FROM (SELECT 1) one LEFT JOIN (o JOIN url_state u "
            "ON u.url_hash = o.url_hash AND u.http_status = 200 AND u.content_hash IS NOT NULL "
            "AND u.last_crawled IS NOT NULL) ON true ORDER BY o.id, o.n",
            (source_id, cursor, list(skip_writers), limit, limit, limit, source_id))
        rows = await cur.fetchall()
    last, full, newest = rows[0][:3] if rows else (None, False, None)
    moved = last if full else newest
    return ([(u, h, t, c) for *_, u, h, t, c in rows if u is not None],
            cursor if moved is None else max(cursor, int(moved)))


@dataclass
class CanonicalCounts:
    """A source's rel=canonical links the miner met: used as evidence, or ignored."""

    used: int = 0
    off_host: int = 0   # pointing to another host
    missing: int = 0    # to a page that answered 4xx/5xx
    looped: int = 0     # to a page that declares yet another canonical (a loop, a chain)


async def save_canonical_counts(db: Db, source_id: str,
                                counts: CanonicalCounts) -> None:
    """Store the counts of the miner's sample; like rule evidence, they only grow."""
    async with connection(db) as conn:
        await conn.execute(
            "INSERT INTO url_rule_canonicals AS c (source_id, used, off_host, missing, looped) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (source_id) DO UPDATE SET "
            "used = GREATEST(c.used, excluded.used), "
            "off_host = GREATEST(c.off_host, excluded.off_host), "
            "missing = GREATEST(c.missing, excluded.missing), "
            "looped = GREATEST(c.looped, excluded.looped), last_seen = now()",
            (source_id, counts.used, counts.off_host, counts.missing, counts.looped))


async def load_canonical_counts(db: Db, source_id: str | None = None
                                ) -> dict[str, CanonicalCounts]:
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, used, off_host, missing, looped FROM url_rule_canonicals "
            "WHERE %s::text IS NULL OR source_id = %s ORDER BY source_id",
            (source_id, source_id))
        return {str(sid): CanonicalCounts(*counts) for sid, *counts in await cur.fetchall()}
