"""Alert evaluation: findings must hold for ``hold_s`` before they fire (three
minutes), fire once, and resolve when they clear. Pending conditions live in hot (shared
by every evaluator); fired alerts in cold, with an anomaly snapshot; each change is also
logged and handed to ``emit`` (the flows pass Prefect's ``emit_event``, so automations and
notification blocks can route alerts)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.alerts import raise_alert, resolve_alerts
from stratacrawl.hot import alerts as alert_state
from stratacrawl.hot.client import HotRedis
from stratacrawl.monitor.families import SourceMetrics, collect
from stratacrawl.monitor.history import prune, roll_up
from stratacrawl.monitor.rules import LEVEL_SEVERITY, Finding, findings
from stratacrawl.monitor.snapshot import capture
from stratacrawl.sources import SourcesFile

log = logging.getLogger(__name__)
RULES = ("fetch_stopped", "not_fetching", "success_rate", "retry_ratio", "ingest_lag", "latency",
         "backlog_growing")
BACKLOG_WINDOW_S = 900
Emit = Callable[[str, dict[str, Any]], None]


@dataclass
class Evaluation:
    metrics: dict[str, SourceMetrics]
    fired: list[tuple[str, Finding, int]] = field(default_factory=list)   # source, finding, id
    resolved: list[tuple[str, str]] = field(default_factory=list)         # source, rule
    pending: list[tuple[str, Finding, float]] = field(default_factory=list)  # held so far (s)


async def evaluate(redis: HotRedis, pool: AsyncConnectionPool, sources: SourcesFile, *, hold_s: float = 180.0,
                   emit: Emit | None = None, now: float | None = None) -> Evaluation:
    now = now or time.time()
    metrics = await collect(redis, pool, sources.ids, now)
    await roll_up(pool, redis, sources.ids, metrics=metrics, now=now)  # charts
    await prune(pool, now)
    ev = Evaluation(metrics)
    for source in sources.sources:
        m = metrics[source.id]
        backlog = await alert_state.backlog_samples(redis, source.id, m.ledger_backlog, now,
                                                    BACKLOG_WINDOW_S)
        found = {f.rule: f for f in findings(m, source.alerts, now, backlog)}
        for rule in RULES:
            f = found.get(rule)
            if f is None:
                await alert_state.cleared(redis, rule, source.id)
                if await resolve_alerts(pool, kind=rule, source_id=source.id):
                    ev.resolved.append((source.id, rule))
                    log.info("alert resolved: %s %s", rule, source.id)
                    if emit:
                        emit("stratacrawl.alert.resolved", {"rule": rule, "source": source.id})
                continue
            since = await alert_state.held_since(redis, rule, source.id, now)
            if now - since < hold_s:
                ev.pending.append((source.id, f, now - since))
                continue
            alert_id = await raise_alert(
                pool, kind=rule, source_id=source.id, message=f.message, level=f.level,
                severity=LEVEL_SEVERITY[f.level], quiet_for=timedelta(days=3650),
                details={"value": f.value, "held_s": round(now - since, 1)})
            if alert_id is None:
                continue  # already firing: once is enough
            await capture(redis, pool, source.id, alert_id)
            ev.fired.append((source.id, f, alert_id))
            log.warning("alert %s %s: %s", f.level, rule, f.message,
                        extra={"source_id": source.id, "alert_id": alert_id})
            if emit:
                emit("stratacrawl.alert.fired", {"rule": rule, "level": f.level,
                                                 "source": source.id, "message": f.message,
                                                 "alert_id": alert_id})
    return ev
