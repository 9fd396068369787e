"""What the load test reads from cold to audit a run, on a plain (blocking) connection of
its own: the tiers' fill while it runs, the tasks a killed worker held and what became of
them, pages staged twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg


def _one(conn: psycopg.Connection[Any], sql: str, *args: Any) -> int:
    row = conn.execute(sql, args or None).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def tier_fill(conn: psycopg.Connection[Any]) -> tuple[int, int, int, int]:
    """(unfinished tasks, staged pages, pages waiting to be cleaned, records)."""
    return (_one(conn, "SELECT count(*) FROM tasks WHERE state IN ('PENDING', 'RETRY_WAIT', "
                       "'LEASED', 'FETCHING')"),
            _one(conn, "SELECT count(*) FROM staging"), uncleaned(conn),
            _one(conn, "SELECT count(*) FROM records"))


def uncleaned(conn: psycopg.Connection[Any]) -> int:
    return _one(conn, "SELECT count(*) FROM staging WHERE clean_state = 'new'")


def cleaned(conn: psycopg.Connection[Any]) -> int:
    """Pages the cleaner has been through: records written or format errors (an
    ``unchanged`` page is staged so and never claimed: no cleaning went into it)."""
    return _one(conn, "SELECT count(*) FROM staging "
                      "WHERE clean_state IN ('cleaned', 'format_error')")


def staged(conn: psycopg.Connection[Any], worker: str | None = None) -> int:
    """Pages staged (by ``worker``, if given)."""
    if worker is None:
        return _one(conn, "SELECT count(*) FROM staging")
    return _one(conn, "SELECT count(*) FROM staging WHERE worker = %s", worker)


def records(conn: psycopg.Connection[Any]) -> int:
    return _one(conn, "SELECT count(*) FROM records")


def staged_twice(conn: psycopg.Connection[Any]) -> int:
    """Item tasks with more than one successful page staged (should be none)."""
    return _one(conn, "SELECT count(*) FROM (SELECT task_id FROM staging WHERE kind = 'item' "
                      "AND status IN (200, 304) GROUP BY task_id HAVING count(*) > 1) d")


def leased_by(conn: psycopg.Connection[Any], worker: str) -> list[int]:
    """Ids of the tasks any run of ``worker`` holds now."""
    return [int(r[0]) for r in conn.execute(
        "SELECT id FROM tasks WHERE split_part(lease_owner, '~', 1) = %s "
        "AND state IN ('LEASED', 'FETCHING')", (worker,)).fetchall()]


def fates(conn: psycopg.Connection[Any], ids: Sequence[int], killed: str
          ) -> list[tuple[str, str | None, bool, bool]]:
    """Per task: (state, lease owner, staged by another worker, staged at all). One join
    (a single pass over staging, which has no task index): per-task EXISTS subqueries
    scanned staging once per task — minutes after a 10-minute run."""
    return [tuple(r) for r in conn.execute(
        "SELECT t.state, t.lease_owner, COALESCE(bool_or(s.worker <> %s), false), "
        "count(s.task_id) > 0 FROM tasks t LEFT JOIN staging s ON s.task_id = t.id "
        "WHERE t.id = ANY(%b::bigint[]) GROUP BY t.id, t.state, t.lease_owner",
        (killed, list(ids))).fetchall()]
