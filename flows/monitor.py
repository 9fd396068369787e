"""monitor (every minute): evaluate the alert rules; fired and resolved alerts become
Prefect events (``stratacrawl.alert.fired`` / ``.resolved``) for automations and
notification blocks, besides PostgreSQL and the logs."""

from __future__ import annotations

from prefect import flow

from flows.common import emit, flow_sources, load_settings, publish, step
from stratacrawl.monitor.evaluate import evaluate
from stratacrawl.wiring import open_app


@flow(name="monitor", log_prints=True)
async def monitor(sources_file: str | None = None) -> dict[str, int]:
    async with open_app(await load_settings(sources=sources_file)) as comps:
        sources = flow_sources(comps.settings)
        ev = await step("evaluate alert rules", lambda: evaluate(
            comps.redis, comps.pool, sources, hold_s=comps.settings.alert_hold_s, emit=emit))
    lines = [f"- **{f.level} {f.rule}** {f.message}" for _, f, _ in ev.fired]   # (names its source)
    lines += [f"- pending {f.level} {f.rule} {sid} ({held:.0f} s)" for sid, f, held in ev.pending]
    lines += [f"- resolved {rule} {sid}" for sid, rule in ev.resolved]
    await publish("stratacrawl-monitor", f"Monitor: {len(ev.fired)} fired, {len(ev.pending)} "
                  f"pending, {len(ev.resolved)} resolved", lines or ["- no alert condition"])
    return {"fired": len(ev.fired), "pending": len(ev.pending), "resolved": len(ev.resolved)}
