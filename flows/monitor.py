"""monitor (every minute): evaluate the alert rules; fired and resolved alerts become
Prefect events (``stratacrawl.alert.fired`` / ``.resolved``) for automations and
notification blocks, besides PostgreSQL and the logs."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.events import emit_event

from flows.common import flow_sources, load_settings, publish, step
from stratacrawl.monitor.evaluate import evaluate
from stratacrawl.wiring import open_app


def emit(event: str, payload: dict[str, Any]) -> None:
    """The event of an alert: its source is the resource, and a fired alert's level is a
    resource label, so an automation can match on it (deployments/automations.py)."""
    resource = {"prefect.resource.id": f"stratacrawl.source.{payload['source']}",
                "prefect.resource.name": str(payload["source"])}
    if "level" in payload:
        resource["stratacrawl.alert.level"] = str(payload["level"])
    emit_event(event=event, resource=resource, payload=payload)


@flow(name="monitor", log_prints=True)
async def monitor(sources_file: str | None = None) -> dict[str, int]:
    async with open_app(await load_settings(sources=sources_file)) as comps:
        sources = flow_sources(comps.settings)
        ev = await step("evaluate alert rules", lambda: evaluate(
            comps.redis, comps.pool, sources, hold_s=comps.settings.alert_hold_s, emit=emit))
    lines = [f"- **{f.level} {f.rule}** {sid}: {f.message}" for sid, f, _ in ev.fired]
    lines += [f"- pending {f.level} {f.rule} {sid} ({held:.0f} s)" for sid, f, held in ev.pending]
    lines += [f"- resolved {rule} {sid}" for sid, rule in ev.resolved]
    await publish("stratacrawl-monitor", f"Monitor: {len(ev.fired)} fired, {len(ev.pending)} "
                  f"pending, {len(ev.resolved)} resolved", lines or ["- no alert condition"])
    return {"fired": len(ev.fired), "pending": len(ev.pending), "resolved": len(ev.resolved)}
