"""The task ledger in PostgreSQL: the store of record of every queued or in-flight URL.

Every state change of a task happens here first (hot queues only mirror a window of
it). Completions are guarded by the lease: a worker whose lease expired and was
reclaimed cannot complete the task any more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.pool import connection
from stratacrawl.cold.runs import LOCK_FREE
from stratacrawl.cold.tasks import LISTS_SQL, ClaimedTask, NewTask, Outcome, TaskState
from stratacrawl.errors import TIER_ERROR_NAMES


def _claim_columns(t: str = "tasks") -> str:
    """The ``RETURNING`` list of a claim, in ``ClaimedTask`` order. A task fetched before
    — recurring, queued again as stale, or retried; ``attempts`` is this claim's count —
    also brings the content fingerprint of its URL's last fetch, to tell whether the page
    changed (an unchanged page is neither discovered nor extracted again). A task claimed
    for the first time, most of them, costs no URL-state lookup."""
    cols = ("id, source_id, url, url_hash, kind, priority, attempts, depth, lease_owner, "
            "lease_expires_at, trace_id, recrawl_s").split(", ")
    return (", ".join(f"{t}.{c}" for c in cols) + f", CASE WHEN {t}.recrawl_s IS NOT NULL "
            f"OR {t}.attempts > 1 THEN "
            f"(SELECT u.content_hash FROM url_state u WHERE u.url_hash = {t}.url_hash) END")


def _change_history(changed: str) -> str:
    """The ``SET`` items that add one fetch to a recurring task's change history:
    ``changed`` is a SQL boolean (NULL: the fetch could not tell)."""
    return (f"revisits = t.revisits + ({changed} IS NOT NULL)::int, "
            f"changes = t.changes + ({changed} IS TRUE)::int, "
            f"changed_at = CASE WHEN {changed} THEN now() ELSE t.changed_at END")


# A task's outcome (``o``: state, status, error, due_at, recrawl_s, changed) applied to
# its row ``t``, and the guard that only its lease holder (the parameter) may apply it.
OUTCOME_ASSIGNMENTS = (
    "state = o.state, last_status = o.status, last_error = o.error, "
    "due_at = COALESCE(o.due_at, t.due_at), lease_owner = NULL, lease_expires_at = NULL, "
    "finished_at = CASE WHEN o.state IN ('SUCCEEDED', 'FAILED', 'REDUNDANT') THEN now() END, "
    f"recrawl_s = COALESCE(o.recrawl_s, t.recrawl_s), {_change_history('o.changed')}, "
    "updated_at = now()")
HELD_BY = "t.lease_owner = %s AND t.state IN ('LEASED', 'FETCHING')"
_READY = "state IN ('PENDING', 'RETRY_WAIT')"
# An item task that is done (a list, seed or sitemap is re-armed: never done for good);
# the predicate of index ``tasks_finished_items`` (migration 0022).
FINISHED_ITEM = "kind = 'item' AND state IN ('SUCCEEDED', 'FAILED', 'REDUNDANT')"
# Statements that address tasks by id (a batch: tens of rows) test their state through
# ``state || ''``, which no partial index predicate matches: the plan is then always the
# primary key. Written plainly, the planner may instead scan the ready or leased index
# and filter it by the id list — on a ledger that grew faster than its statistics (any
# crawl's first minutes) it did, at 2-3 ms a claim where the key lookup takes 0.1 ms.
_BY_ID_READY = "state || '' IN ('PENDING', 'RETRY_WAIT')"
_BY_ID_HELD = "state || '' IN ('LEASED', 'FETCHING')"
CLOCK_SLACK = timedelta(seconds=5)  # hot-queue due times are the workers' clocks, not ours
ReadyCursor = tuple[int, datetime, int]   # (-priority, due_at, id) of the last task read


def _claimed(rows: Sequence[tuple]) -> list[ClaimedTask]:  # type: ignore[type-arg]
    return [ClaimedTask(*row) for row in rows]


# An enqueue is one statement (one round trip: discovery's list hop waits on it). Its
# batch: one row per (source, URL), the highest priority first. A task's identity is its
# row in task_keys (migration 0014): a key that goes in is a new task, with its URL state
# if the URL is new too; a key already there is a known URL, which ``requeue`` and
# ``urgent`` queue again (the UPDATE's snapshot does not see the keys this statement
# inserts, so only tasks that existed before are touched).
_ENQUEUE = (
    "WITH batch AS (SELECT DISTINCT ON (source_id, url_hash) * FROM unnest(%(source)b::text[], "
    "%(url)b::text[], %(hash)b::uuid[], %(kind)b::text[], %(priority)b::int2[], "
    "%(due)b::timestamptz[], %(depth)b::int4[], %(trace)b::text[]) AS n(source_id, url, "
    "url_hash, kind, priority, due_at, depth, trace_id) ORDER BY source_id, url_hash, "
    "priority DESC), "
    "keyed AS (INSERT INTO task_keys (source_id, url_hash, task_id) SELECT source_id, url_hash, "
    "nextval('tasks_id_seq') FROM batch ON CONFLICT DO NOTHING RETURNING source_id, url_hash, "
    "task_id), "
    "added AS (INSERT INTO tasks (id, source_id, url, url_hash, kind, priority, due_at, depth, "
    "trace_id) SELECT k.task_id, b.source_id, b.url, b.url_hash, b.kind, b.priority, b.due_at, "
    "b.depth, b.trace_id FROM keyed k JOIN batch b USING (source_id, url_hash) "
    "RETURNING source_id, id, priority, due_at), "
    "urls AS (INSERT INTO url_state (url_hash, source_id, url) SELECT DISTINCT ON (url_hash) "
    "url_hash, source_id, url FROM batch ORDER BY url_hash ON CONFLICT (url_hash) DO NOTHING)"
    "{known} SELECT source_id, id, priority, extract(epoch FROM due_at) FROM added{also}")


def _known_again(assignments: str, states: str) -> str:
    return _ENQUEUE.format(
        known=f", known AS (UPDATE tasks t SET {assignments}, updated_at = now() FROM batch b "
              "JOIN task_keys k USING (source_id, url_hash) WHERE t.id = k.task_id "
              f"AND t.state {states} RETURNING t.source_id, t.id, t.priority, t.due_at)",
        also=" UNION ALL SELECT source_id, id, priority, extract(epoch FROM due_at) FROM known")


_ENQUEUE_SQL = {
    "skip": _ENQUEUE.format(known="", also=""),
    # finished tasks are PENDING again (a stale URL due for re-crawl)
    "requeue": _known_again("state = 'PENDING', due_at = b.due_at", "IN ('SUCCEEDED', 'FAILED')"),
    # any task not in flight gets the higher priority and the earlier due time
    "urgent": _known_again("priority = GREATEST(t.priority, b.priority), "
                           "due_at = LEAST(t.due_at, b.due_at), state = 'PENDING'",
                           "NOT IN ('LEASED', 'FETCHING')"),
}


class Ledger:
    """Task ledger operations; each takes its own connection from the pool unless given one."""

    def __init__(self, *, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    async def enqueue(self, tasks: Sequence[NewTask], *,
                      on_conflict: Literal["skip", "requeue", "urgent"] = "skip",
                      ) -> list[tuple[str, int, int, float]]:
        """Insert tasks and their URL state in one statement; returns (source, id,
        priority, due epoch) of each task queued. Known URLs:
        ``skip`` leaves them alone; ``requeue`` makes finished ones PENDING again (a stale
        URL due for re-crawl); ``urgent`` also raises priority and due time of any task not
        in flight (urgent submissions jump every queue).
        """
        if not tasks:
            return []
        now = datetime.now(UTC)
        params = {"source": [t.source_id for t in tasks], "url": [t.url for t in tasks],
                  "hash": [t.url_hash for t in tasks], "kind": [t.kind for t in tasks],
                  "priority": [t.priority for t in tasks],
                  "due": [t.due_at or now for t in tasks], "depth": [t.depth for t in tasks],
                  "trace": [t.trace_id for t in tasks]}
        async with self.pool.connection() as conn:
            cur = await conn.execute(_ENQUEUE_SQL[on_conflict], params)
            return [(s, int(i), int(p), float(d)) for s, i, p, d in await cur.fetchall()]

    async def queued(self, source_id: str, url_hashes: Sequence[str]) -> set[str]:
        """Which of these URL fingerprints the source already has a task for."""
        if not url_hashes:
            return set()
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT url_hash FROM task_keys WHERE source_id = %s AND url_hash = ANY(%b::uuid[])",
                (source_id, list(url_hashes)))
            return {str(h) for (h,) in await cur.fetchall()}

    async def states(self, source_id: str, url_hashes: Sequence[str]
                     ) -> dict[str, tuple[str, str]]:
        """The source's tasks of these URL fingerprints: fingerprint → (kind, state)."""
        if not url_hashes:
            return {}
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT k.url_hash, t.kind, t.state FROM task_keys k JOIN tasks t "
                "ON t.id = k.task_id WHERE k.source_id = %s AND k.url_hash = ANY(%b::uuid[])",
                (source_id, list(url_hashes)))
            return {str(h): (str(kind), str(state)) for h, kind, state in await cur.fetchall()}

    async def rearm(self, source_id: str, cadence: timedelta) -> int:
        """Seeds and list pages finished longer than ``cadence`` ago become due again."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE tasks SET state = 'PENDING', due_at = now(), updated_at = now() "
                f"WHERE source_id = %s AND kind IN ({LISTS_SQL}) AND state IN "
                "('SUCCEEDED', 'FAILED') AND COALESCE(finished_at, updated_at) < now() - %s",
                (source_id, cadence))
            return cur.rowcount

    async def retire(self, finished_before: datetime, batch: int = 10_000) -> int:
        """Delete item tasks finished before ``finished_before``, with their keys, in
        transactions of ``batch``; returns how many. The URL's state stays in
        ``url_state`` (dedup and re-crawl read it there): a URL found again later is
        queued as a new task. A task requeued meanwhile is not finished any more: the
        DELETE tests its state again on the row it locks."""
        done = 0
        while True:
            async with self.pool.connection() as conn:
                cur = await conn.execute(
                    f"WITH gone AS (DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE "
                    f"{FINISHED_ITEM} AND finished_at < %s ORDER BY finished_at LIMIT %s) "
                    f"AND {FINISHED_ITEM} AND finished_at < %s "
                    "RETURNING source_id, url_hash, id), "
                    "keys AS (DELETE FROM task_keys k USING gone g WHERE k.source_id = "
                    "g.source_id AND k.url_hash = g.url_hash AND k.task_id = g.id) "
                    "SELECT count(*) FROM gone", (finished_before, batch, finished_before))
                row = await cur.fetchone()
                n = int(row[0]) if row else 0
            done += n
            if n < batch:
                return done

    async def ready_ids(self, source_id: str, limit: int,
                        horizon: timedelta = timedelta(0)) -> list[tuple[int, int, float]]:
        """(id, priority, due epoch) of tasks due within ``horizon``, best first."""
        return (await self.ready_page(source_id, limit, horizon))[0]

    async def ready_page(self, source_id: str, limit: int, horizon: timedelta = timedelta(0),
                         after: ReadyCursor | None = None
                         ) -> tuple[list[tuple[int, int, float]], ReadyCursor | None]:
        """Like ``ready_ids``, continuing after ``after`` (keyset over the ready index: dead
        entries of claimed tasks at its head are not read again); returns the page and the
        cursor of its last task (``None`` when the page is empty)."""
        keyset = "AND (-priority, due_at, id) > (%s, %s, %s) " if after else ""
        params: tuple[object, ...] = (source_id, horizon, *(after or ()), limit)
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                f"SELECT id, priority, extract(epoch FROM due_at), due_at FROM tasks "
                f"WHERE source_id = %s AND {_READY} AND due_at <= now() + %s {keyset}"
                f"ORDER BY -priority, due_at, id LIMIT %s", params)
            rows = await cur.fetchall()
        page = [(int(i), int(p), float(d)) for i, p, d, _ in rows]
        last = rows[-1] if rows else None
        return page, ((-int(last[1]), last[3], int(last[0])) if last else None)

    async def claim_ids(self, ids: Sequence[int], owner: str, lease: timedelta,
                        batch_id: str | None = None) -> list[ClaimedTask]:
        """Lease exactly these tasks if still ready and due (the guard behind hot-queue
        claims: a window may hold an id that was rescheduled after it was pushed)."""
        if not ids:
            return []
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE tasks SET state = 'LEASED', lease_owner = %s, lease_expires_at = now() + %s,"
                " batch_id = %s, attempts = attempts + 1, updated_at = now() "
                f"WHERE id = ANY(%b::bigint[]) AND {_BY_ID_READY} AND due_at <= now() + %s "
                f"RETURNING {_claim_columns()}",
                (owner, lease, batch_id, list(ids), CLOCK_SLACK))
            rows = await cur.fetchall()
        order = {i: n for n, i in enumerate(ids)}
        return sorted(_claimed(rows), key=lambda t: order[t.id])

    async def claim_direct(self, source_id: str, limit: int, owner: str, lease: timedelta,
                           batch_id: str | None = None) -> list[ClaimedTask]:
        """Lease the best due tasks of a source straight from the ledger (SKIP LOCKED)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "WITH picked AS (SELECT id FROM tasks WHERE source_id = %s AND "
                f"{_READY} AND due_at <= now() ORDER BY -priority, due_at, id LIMIT %s "
                "FOR UPDATE SKIP LOCKED) UPDATE tasks t SET state = 'LEASED', lease_owner = %s, "
                "lease_expires_at = now() + %s, batch_id = %s, attempts = attempts + 1, "
                f"updated_at = now() FROM picked WHERE t.id = picked.id RETURNING "
                + _claim_columns("t"),
                (source_id, limit, owner, lease, batch_id))
            rows = await cur.fetchall()
        return sorted(_claimed(rows), key=lambda t: (-t.priority, t.id))

    async def finish(self, outcomes: Sequence[Outcome], owner: str,
                     conn: AsyncConnection | None = None) -> int:
        """Apply outcomes of tasks this owner holds; returns how many were applied.

        With ``conn`` the update joins the caller's transaction (staging writes commit
        together with the ledger); without, it commits on its own.
        """
        if not outcomes:
            return 0
        outcomes = sorted(outcomes, key=lambda o: o.task_id)  # one lock order for all writers
        sql = (
            f"UPDATE tasks t SET {OUTCOME_ASSIGNMENTS} "
            "FROM (SELECT unnest(%b::bigint[]) AS id, unnest(%b::text[]) AS "
            "state, unnest(%b::int[]) AS status, unnest(%b::text[]) AS error, "
            "unnest(%b::timestamptz[]) AS due_at, unnest(%b::real[]) AS recrawl_s, "
            "unnest(%b::bool[]) AS changed) o WHERE t.id = o.id AND t.id = ANY(%b::bigint[]) "
            f"AND t.lease_owner = %s AND t.{_BY_ID_HELD}")
        # ``t.id = ANY(ids)`` looks the batch up by primary key: on the join alone the
        # planner may hash every leased task (a sequential scan of the ledger per flush).
        # The state is tested by id (see ``_BY_ID_HELD``): written plainly, a ledger whose
        # statistics lag was planned through the leased index at ~2x the cost a task, and
        # with an estimate of one row, as a nested loop over the whole batch.
        ids = [o.task_id for o in outcomes]
        params = (ids, [str(o.state) for o in outcomes], [o.status for o in outcomes],
                  [o.error for o in outcomes], [o.due_at for o in outcomes],
                  [o.recrawl_s for o in outcomes], [o.changed for o in outcomes], ids, owner)
        async with connection(conn if conn is not None else self.pool) as c:
            return (await c.execute(sql, params)).rowcount

    async def grade_lists(self, grades: Sequence[tuple[int, bool, float, float]],
                          shrink: float, grow: float) -> int:
        """Re-time list pages whose new body was just discovered: (task id, whether it had
        new links, the interval's floor and ceiling in seconds). New links shrink the
        interval, none grow it (the page only shifted); the due time moves with it. A
        task leased again meanwhile keeps its interval."""
        if not grades:
            return 0
        interval = ("LEAST(GREATEST(t.recrawl_s * CASE WHEN g.new THEN %s ELSE %s END, g.lo), "
                    "g.hi)")
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                f"UPDATE tasks t SET recrawl_s = {interval}, due_at = t.due_at + make_interval("
                f"secs => {interval} - t.recrawl_s), {_change_history('g.new')} "
                "FROM (SELECT unnest(%b::bigint[]) AS id, unnest(%b::bool[]) AS new, "
                "unnest(%b::real[]) AS lo, unnest(%b::real[]) AS hi) g WHERE t.id = g.id "
                "AND t.state = 'PENDING' AND t.recrawl_s IS NOT NULL",
                (shrink, grow, shrink, grow, *(list(c) for c in zip(*sorted(grades),
                                                                    strict=True))))
            return cur.rowcount

    async def renew(self, ids: Sequence[int], owner: str, lease: timedelta) -> list[int]:
        """Extend the leases ``owner`` still holds among ``ids``; returns their ids."""
        if not ids:
            return []
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE tasks SET lease_expires_at = now() + %s WHERE id = ANY(%b::bigint[]) "
                f"AND lease_owner = %s AND {_BY_ID_HELD} RETURNING id",
                (lease, sorted(ids), owner))
            return [int(r[0]) for r in await cur.fetchall()]

    async def reclaim_expired(self, dead_after: timedelta | None = None,
                              by_lock: bool = False) -> list[tuple[str, int]]:
        """Expired leases go back to PENDING, and so do those of runs that ended (they
        said so in ``crawl_runs``) — and, with ``dead_after``, of runs whose heartbeat is
        older than that, and with ``by_lock``, of runs whose advisory lock nobody holds
        (their connection closed: see :mod:`stratacrawl.cold.runs`), whatever their
        expiry; returns (source, id) of each task."""
        stale = "OR r.heartbeat_at < now() - %s" if dead_after is not None else ""
        unlocked = f"OR {LOCK_FREE}" if by_lock else ""
        dead = ("OR lease_owner IN (SELECT run_id FROM crawl_runs r WHERE r.ended_at IS NOT "
                f"NULL {stale} {unlocked})")
        async with self.pool.connection() as conn, conn.transaction():
            # The leased index holds an entry for every lease since the table was last
            # vacuumed (a claim and an outcome each write the row anew), nearly all of them
            # of finished leases. A bitmap scan (the planner's choice) visits each one's
            # heap page on every reclaim — 6 ms at 200,000 finished leases, growing until
            # autovacuum comes, which on a large ledger is rare. A plain index scan marks
            # the ones it finds dead in the index, and every later scan skips them without
            # a heap visit (0.5 ms at 200,000): the cost follows the leases ended since
            # the last reclaim, not the ledger's history.
            await conn.execute("SET LOCAL enable_bitmapscan = off")
            # SKIP LOCKED: every worker reclaims at the same moment (a dead worker's
            # leases expire together); two plain UPDATEs locking the same rows in
            # different orders deadlocked, and PostgreSQL aborted one of them.
            cur = await conn.execute(
                "WITH expired AS (SELECT id FROM tasks WHERE state IN ('LEASED', 'FETCHING') "
                f"AND (lease_expires_at < now() {dead}) FOR UPDATE SKIP LOCKED) "
                "UPDATE tasks t SET state = 'PENDING', lease_owner = NULL, "
                "lease_expires_at = NULL, last_error = 'lease expired', updated_at = now() "
                "FROM expired WHERE t.id = expired.id RETURNING t.source_id, t.id",
                (dead_after,) if dead_after is not None else None)
            rows = await cur.fetchall()
        return [(str(s), int(i)) for s, i in rows]

    async def leased_by_others(self, source_ids: Sequence[str], owner: str) -> int:
        """Tasks of these sources leased to anyone but ``owner`` (the leased index is small)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM tasks WHERE state IN ('LEASED', 'FETCHING') AND "
                "source_id = ANY(%b) AND lease_owner IS DISTINCT FROM %s",
                (list(source_ids), owner))
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def release(self, ids: Sequence[int], owner: str, due_at: datetime | None = None) -> int:
        """Give leased tasks back unfetched (shutdown, level-2 delay): ``RETRY_WAIT`` until due."""
        state = TaskState.RETRY_WAIT if due_at else TaskState.PENDING
        return await self.finish([Outcome(i, state, due_at=due_at) for i in ids], owner)

    async def give_back(self, ids: Sequence[int], owner: str, reason: str) -> int:
        """Leased tasks back to ``PENDING`` unfetched, the attempt their claim counted
        refunded: the crawl stopped, or one of our own tiers did not answer — neither is
        the page's fault, so neither may bring it closer to ``FAILED``."""
        return await self.hold_back(dict.fromkeys(ids, reason), owner)

    async def hold_back(self, reasons: Mapping[int, str], owner: str,
                        due_at: datetime | None = None) -> int:
        """Leased tasks back to ``PENDING`` unfetched, the attempt their claim counted
        refunded (no fault of theirs), due at ``due_at`` (None: when they were due):
        task id → the reason, in its ``last_error``."""
        if not reasons:
            return 0
        ids = sorted(reasons)
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "UPDATE tasks t SET state = 'PENDING', attempts = GREATEST(attempts - 1, 0), "
                "lease_owner = NULL, lease_expires_at = NULL, last_error = h.reason, "
                "due_at = COALESCE(%s, t.due_at), updated_at = now() FROM (SELECT "
                "unnest(%b::bigint[]) AS id, unnest(%b::text[]) AS reason) h "
                "WHERE t.id = h.id AND t.id = ANY(%b::bigint[]) "
                f"AND t.lease_owner = %s AND t.{_BY_ID_HELD}",
                (due_at, ids, [reasons[i] for i in ids], ids, owner))
            return cur.rowcount

    async def requeue_tier_failures(self) -> list[str]:
        """Tasks that ended ``FAILED`` because one of our tiers did not answer (an older
        version spent attempts on that): ``PENDING`` and due now, attempts reset; the
        source of each."""
        return [r[0] for r in await self._rows(
            "UPDATE tasks SET state = 'PENDING', due_at = now(), attempts = 0, "
            "finished_at = NULL, updated_at = now() WHERE state = 'FAILED' AND "
            "last_error = ANY(%s) RETURNING source_id", list(TIER_ERROR_NAMES))]

    async def counts(self) -> dict[str, dict[str, int]]:
        """Tasks per source and state."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT source_id, state, count(*) FROM tasks GROUP BY 1, 2 ORDER BY 1, 2")
            out: dict[str, dict[str, int]] = {}
            for source, state, n in await cur.fetchall():
                out.setdefault(source, {})[state] = int(n)
            return out

    # -- compensation: work that went astray ----------------------------------------------
    async def _rows(self, sql: str, *params: object) -> list[tuple[str, ...]]:
        async with self.pool.connection() as conn:
            return [tuple(r) for r in await (await conn.execute(sql, params or None)).fetchall()]

    async def reschedule_overdue(self, overdue_after: timedelta) -> list[str]:
        """Ready tasks overdue by more than ``overdue_after``: due now, one priority higher;
        returns the source of each."""
        return [r[0] for r in await self._rows(
            "UPDATE tasks SET due_at = now(), priority = LEAST(priority + 1, 9), updated_at = now() "
            "WHERE state IN ('PENDING', 'RETRY_WAIT') AND due_at < now() - %s "
            "RETURNING source_id", overdue_after)]

    async def release_parked(self, beyond: timedelta) -> list[str]:
        """``RETRY_WAIT`` tasks due later than ``beyond`` from now: due now; their sources."""
        return [r[0] for r in await self._rows(
            "UPDATE tasks SET due_at = now(), updated_at = now() WHERE state = 'RETRY_WAIT' "
            "AND due_at > now() + %s RETURNING source_id", beyond)]

    async def unfinished_by_age(self) -> list[tuple[str, str, int]]:
        """(source, age bucket of the last change, tasks) of unfinished work."""
        return [(s, b, int(n)) for s, b, n in await self._rows(
            "SELECT source_id, CASE WHEN now() - updated_at < interval '1 hour' THEN '< 1 h' "
            "WHEN now() - updated_at < interval '1 day' THEN '1 h - 1 d' ELSE '> 1 d' END, "
            "count(*) FROM tasks WHERE state IN ('PENDING', 'RETRY_WAIT', 'LEASED', 'FETCHING') "
            "GROUP BY 1, 2")]

    async def failed_last_day(self) -> list[tuple[str, int]]:
        return [(s, int(n)) for s, n in await self._rows(
            "SELECT source_id, count(*) FROM tasks WHERE state = 'FAILED' "
            "AND finished_at > now() - interval '24 hours' GROUP BY 1")]

    async def sources_with_ready_tasks(self) -> list[str]:
        """Distinct sources with ready tasks, by a skip scan of the ready index (one probe
        per source, not a scan of millions of tasks)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "WITH RECURSIVE s AS ((SELECT source_id FROM tasks WHERE state IN ('PENDING', "
                "'RETRY_WAIT') ORDER BY source_id LIMIT 1) UNION ALL SELECT (SELECT t.source_id "
                "FROM tasks t WHERE t.state IN ('PENDING', 'RETRY_WAIT') AND t.source_id > "
                "s.source_id ORDER BY t.source_id LIMIT 1) FROM s WHERE s.source_id IS NOT NULL) "
                "SELECT source_id FROM s WHERE source_id IS NOT NULL")
            return [str(r[0]) for r in await cur.fetchall()]

    async def sources_left_waiting(self, source_ids: Sequence[str]) -> list[str]:
        """Which of these sources have work due now that nobody holds a lease on any of
        (no run is working on them: not this one, not another)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT s FROM unnest(%b::text[]) AS s WHERE EXISTS (SELECT 1 FROM tasks WHERE "
                f"source_id = s AND {_READY} AND due_at <= now()) AND NOT EXISTS (SELECT 1 "
                "FROM tasks WHERE source_id = s AND state IN ('LEASED', 'FETCHING'))",
                (list(source_ids),))
            return [str(r[0]) for r in await cur.fetchall()]

    async def sources_with_due_work(self, source_ids: Sequence[str],
                                    within: timedelta = timedelta(0)) -> list[str]:
        """Which of these sources have a task due now or ``within`` from now (one index
        probe per source)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(
                "SELECT s FROM unnest(%b::text[]) AS s WHERE EXISTS (SELECT 1 FROM tasks WHERE "
                f"source_id = s AND {_READY} AND due_at <= now() + %s)",
                (list(source_ids), within))
            return [str(r[0]) for r in await cur.fetchall()]
