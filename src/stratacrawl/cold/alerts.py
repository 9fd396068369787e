"""Alerts in the cold tier: raised by cleaning (format anomalies) and validation (failed
checks); one open alert per kind and source at a time, so a flapping check does not flood."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from stratacrawl.cold.pool import Db, connection


@dataclass(frozen=True)
class Alert:
    id: int
    raised_at: datetime
    kind: str
    source_id: str | None
    severity: str
    message: str
    details: dict[str, Any]
    level: str | None = None
    snapshot_id: int | None = None


async def raise_alert(db: Db, *, kind: str, source_id: str | None,
                      message: str, details: dict[str, Any] | None = None,
                      severity: str = "warning", level: str | None = None,
                      quiet_for: timedelta = timedelta(hours=1)) -> int | None:
    """Record an alert unless the same kind is already open for the source since less than
    ``quiet_for``; returns the new alert's id, or ``None`` when it was folded. An open
    alert of a milder level (P2 while this one is P1: levels run P0, the most severe, to
    P3) is not folded into: it is resolved as escalated and this one recorded, so a
    condition that worsens notifies again at its new level."""
    async with connection(db) as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('alert:' || %s || ':' || %s))",
                           (kind, source_id or ""))
        cur = await conn.execute(
            "SELECT id, level FROM alerts WHERE kind = %s AND source_id IS NOT DISTINCT FROM %s "
            "AND resolved_at IS NULL AND raised_at > now() - %s", (kind, source_id, quiet_for))
        open_rows = await cur.fetchall()
        milder = [i for i, lvl in open_rows if level and lvl and level < lvl]
        if open_rows and len(milder) < len(open_rows):
            return None
        if milder:
            await conn.execute(
                "UPDATE alerts SET resolved_at = now(), details = details || "
                "jsonb_build_object('escalated_to', %s::text) WHERE id = ANY(%s)", (level, milder))
        cur = await conn.execute(
            "INSERT INTO alerts (kind, source_id, severity, level, message, details) "
            "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
            (kind, source_id, severity, level, message, json.dumps(details or {}, default=str)))
        row = await cur.fetchone()
        return int(row[0]) if row else None


async def resolve_alerts(db: Db, *, kind: str, source_id: str | None,
                         note: str | None = None) -> int:
    """Resolve the open alerts of a kind and source; ``note`` (``details.resolution``)
    says how, where something other than the condition clearing resolved them."""
    async with connection(db) as conn:
        cur = await conn.execute(
            "UPDATE alerts SET resolved_at = now(), details = CASE WHEN %s::text IS NULL "
            "THEN details ELSE details || jsonb_build_object('resolution', %s::text) END "
            "WHERE kind = %s AND source_id IS NOT DISTINCT FROM %s AND resolved_at IS NULL",
            (note, note, kind, source_id))
        return cur.rowcount


async def open_alerts(db: Db, kind: str | None = None) -> list[Alert]:
    async with connection(db) as conn:
        cur = await conn.execute(
            "SELECT id, raised_at, kind, source_id, severity, message, details, level, "
            "snapshot_id FROM alerts "
            "WHERE resolved_at IS NULL AND (%s::text IS NULL OR kind = %s) ORDER BY raised_at DESC",
            (kind, kind))
        return [Alert(*row) for row in await cur.fetchall()]
