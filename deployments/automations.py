"""The automations a Stratacrawl Prefect server needs, created idempotently (by name).

``stratacrawl: crash unresponsive flow runs``: a flow run whose process died with its
host (kill -9, a lost machine) stops sending heartbeats and would stay Running forever;
this marks it Crashed once three heartbeat periods pass without one (Prefect's own
recipe for zombie flow runs). Heartbeats: ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` on the
workers (Prefect's default 180 s; ``stratacrawl up`` and the load test use shorter ones).

Run by ``stratacrawl up`` (through ``deployments.bootstrap``) and the load test; against
any other Prefect API: ``PREFECT_API_URL=... python -m deployments.automations``.
"""

from __future__ import annotations

from datetime import timedelta

from prefect.automations import Automation
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.settings import get_current_settings

CRASH_UNRESPONSIVE = "stratacrawl: crash unresponsive flow runs"
MISSED_HEARTBEATS = 3


def crash_unresponsive(heartbeat_s: int) -> Automation:
    return Automation(
        name=CRASH_UNRESPONSIVE,
        description=f"A running flow run without a heartbeat for {MISSED_HEARTBEATS} "
                    f"periods ({heartbeat_s} s each) is marked Crashed.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", "prefect.flow-run.Completed",
                    "prefect.flow-run.Failed", "prefect.flow-run.Cancelled",
                    "prefect.flow-run.Crashed"},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=MISSED_HEARTBEATS * heartbeat_s),
        ),
        actions=[ChangeFlowRunState(
            state=StateType.CRASHED,
            message=f"No heartbeat for {MISSED_HEARTBEATS * heartbeat_s} s: the process "
                    "running this flow run is gone (host lost or killed). Its leased "
                    "tasks go back to the other workers when their leases expire."),
        ],
    )


def ensure() -> str:
    """Create or update the automations; returns what was done."""
    heartbeat_s = get_current_settings().flows.heartbeat_frequency or 180
    wanted = crash_unresponsive(heartbeat_s)
    try:
        existing = Automation.read(name=CRASH_UNRESPONSIVE)
    except ValueError:  # not there yet
        wanted.create()
        return f"created {CRASH_UNRESPONSIVE!r} (after {MISSED_HEARTBEATS * heartbeat_s} s)"
    existing.trigger, existing.actions = wanted.trigger, wanted.actions
    existing.description = wanted.description
    existing.update()
    return f"updated {CRASH_UNRESPONSIVE!r} (after {MISSED_HEARTBEATS * heartbeat_s} s)"


if __name__ == "__main__":
    print(ensure())
