"""Repair proposals and the versions of each source's ``extract`` block (``repair/``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stratacrawl.cold.pool import Db, connection


@dataclass(frozen=True)
class ProposalRow:
    id: int
    source_id: str
    created_at: datetime
    state: str
    proposal: dict[str, Any]
    extract: dict[str, Any]
    decided_at: datetime | None
    decided_by: str | None
    comment: str | None
    version: int | None


@dataclass(frozen=True)
class VersionRow:
    source_id: str
    version: int
    extract: dict[str, Any]
    created_at: datetime
    reason: str


_PROPOSAL = ("id, source_id, created_at, state, proposal, extract, decided_at, decided_by, "
             "comment, version")


async def save_proposal(db: Db, source_id: str, proposal: dict[str, Any],
                        extract: dict[str, Any]) -> int:
    """Record a proposal; the source's earlier open ones are superseded by it."""
    async with connection(db) as conn, conn.transaction():
        await conn.execute("UPDATE repair_proposals SET state = 'superseded', decided_at = now() "
                           "WHERE source_id = %s AND state = 'proposed'", (source_id,))
        cur = await conn.execute(
            "INSERT INTO repair_proposals (source_id, proposal, extract) VALUES (%s, %s, %s) "
            "RETURNING id", (source_id, json.dumps(proposal, default=str), json.dumps(extract)))
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def proposal(db: Db, source_id: str, proposal_id: int | None = None
                   ) -> ProposalRow | None:
    """The proposal ``proposal_id`` of the source, else its newest one."""
    async with connection(db) as conn:
        cur = await conn.execute(
            f"SELECT {_PROPOSAL} FROM repair_proposals WHERE source_id = %s "
            "AND (%s::bigint IS NULL OR id = %s) ORDER BY id DESC LIMIT 1",
            (source_id, proposal_id, proposal_id))
        row = await cur.fetchone()
        return ProposalRow(*row) if row else None


async def decide(db: Db, proposal_id: int, state: str, by: str, comment: str,
                 version: int | None = None) -> bool:
    """Approve or reject an open proposal; False when it was no longer open."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "UPDATE repair_proposals SET state = %s, decided_at = now(), decided_by = %s, "
            "comment = %s, version = %s WHERE id = %s AND state = 'proposed'",
            (state, by, comment, version, proposal_id))
        return cur.rowcount == 1


async def versions(db: Db, source_id: str) -> list[VersionRow]:
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT source_id, version, extract, created_at, reason FROM extract_versions "
            "WHERE source_id = %s ORDER BY version", (source_id,))
        return [VersionRow(*row) for row in await cur.fetchall()]


async def add_version(db: Db, source_id: str, extract: dict[str, Any], reason: str) -> int:
    """Record the block written now as the source's next version; returns its number."""
    async with connection(db) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('extract_versions:' || %s))",
                           (source_id,))
        cur = await conn.execute(
            "INSERT INTO extract_versions (source_id, version, extract, reason) "
            "SELECT %s, coalesce(max(version), 0) + 1, %s, %s FROM extract_versions "
            "WHERE source_id = %s RETURNING version",
            (source_id, json.dumps(extract), reason, source_id))
        row = await cur.fetchone()
        return int(row[0]) if row else 0
