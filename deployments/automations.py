"""The automations a Stratacrawl Prefect server needs, created idempotently (by name).

``stratacrawl: crash unresponsive flow runs``: a flow run whose process died with its
host (kill -9, a lost machine) stops sending heartbeats and would stay Running forever;
this marks it Crashed once three heartbeat periods pass without one (Prefect's own
recipe for zombie flow runs). Heartbeats: ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` on the
workers (Prefect's default 180 s; ``stratacrawl up`` and the load test use shorter ones).

``stratacrawl: notify P0/P1 alerts``: every ``stratacrawl.alert.fired`` event of level
P0 or P1 (the monitor flow emits one per alert it raises, the level as the resource
label ``stratacrawl.alert.level``) becomes a notification through the notification
block named ``stratacrawl-alerts``. By default that block is a Custom Webhook posting
``{"text", "subject", "body"}`` as JSON to ``STRATACRAWL_ALERT_WEBHOOK_URL`` (the subject
names level, rule and source; the body the alert's message, id and time); save any other
Prefect notification block (Slack Webhook, SendGrid email, Microsoft Teams, PagerDuty …)
under that name instead and the automation uses it. With neither, no notification automation is made (and the
function says so).

``stratacrawl: repair a source whose layout changed``: every ``stratacrawl.alert.fired``
event of rule ``integrity`` (the cleaning flow's minute-level check found a source's
fields gone) starts a run of the ``repair`` deployment for that source: it proposes new
rules and pauses for an approval (``flows/repair.py``). Made after ``prefect deploy``
(:func:`ensure_deployed`, by ``python -m deployments.bootstrap deployment-limits``).

Run by ``stratacrawl up`` (through ``deployments.bootstrap``) and the load test; against
any other Prefect API: ``PREFECT_API_URL=... python -m deployments.automations``.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import cast

from prefect.automations import Automation
from prefect.blocks.notifications import CustomWebhookNotificationBlock
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState, RunDeployment, SendNotification
from prefect.events.schemas.automations import EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.settings import get_current_settings

CRASH_UNRESPONSIVE = "stratacrawl: crash unresponsive flow runs"
NOTIFY_ALERTS = "stratacrawl: notify P0/P1 alerts"
REPAIR_ON_INTEGRITY = "stratacrawl: repair a source whose layout changed"
REPAIR_DEPLOYMENT = "repair/repair"
ALERT_BLOCK = "stratacrawl-alerts"
NOTIFIED_LEVELS = ["P0", "P1"]
MISSED_HEARTBEATS = 3

SUBJECT = "Stratacrawl {{ event.payload.level }} {{ event.payload.rule }} on {{ event.payload.source }}"
BODY = "{{ event.payload.message }} (alert {{ event.payload.alert_id }}, {{ event.occurred }})"


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


def webhook_block(url: str) -> CustomWebhookNotificationBlock:
    """The default alert channel: a JSON POST a chat hook or an HTTP receiver can read
    (``text`` is what Slack/Mattermost-style incoming webhooks show). A webhook URL is a
    credential (its path or query carries the token), so it is kept among the block's
    secrets — masked in Prefect's API and UI like the tier blocks' URLs — and the block's
    plain ``url`` field is only the template that names it."""
    return CustomWebhookNotificationBlock(
        name=ALERT_BLOCK, url="{{webhook_url}}", method="POST",
        secrets={"webhook_url": url},
        json_data={"text": "{{subject}}\n{{body}}", "subject": "{{subject}}", "body": "{{body}}"})


def notify_alerts(block_document_id: object) -> Automation:
    return Automation(
        name=NOTIFY_ALERTS,
        description=f"Each fired alert of level {' or '.join(NOTIFIED_LEVELS)} is sent "
                    f"through the notification block {ALERT_BLOCK!r}.",
        trigger=EventTrigger(
            expect={"stratacrawl.alert.fired"},
            match=ResourceSpecification({"prefect.resource.id": ["stratacrawl.source.*"],
                                         "stratacrawl.alert.level": NOTIFIED_LEVELS}),
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[SendNotification(block_document_id=block_document_id,
                                  subject=SUBJECT, body=BODY)],
    )


def repair_on_integrity(deployment_id: object) -> Automation:
    return Automation(
        name=REPAIR_ON_INTEGRITY,
        description="Each integrity alert (a source's fields gone from its pages) starts a "
                    "repair run for the source: rules proposed, then a pause for approval.",
        trigger=EventTrigger(
            expect={"stratacrawl.alert.fired"},
            match=ResourceSpecification({"prefect.resource.id": ["stratacrawl.source.*"],
                                         "stratacrawl.alert.rule": "integrity"}),
            posture=Posture.Reactive,
            threshold=1,
            within=timedelta(0),
        ),
        actions=[RunDeployment(
            source="selected", deployment_id=deployment_id,
            parameters={"source": {"__prefect_kind": "jinja",
                                   "template": "{{ event.payload.source }}"}})],
    )


def _alert_block_id(webhook_url: str | None) -> object | None:
    """The notification block's id: saved anew from ``webhook_url`` when given, else the
    one already saved under :data:`ALERT_BLOCK` (of any notification type), else None."""
    if webhook_url:
        return webhook_block(webhook_url).save(ALERT_BLOCK, overwrite=True)
    with get_client(sync_client=True) as client:
        for doc in client.read_block_documents():
            if doc.name == ALERT_BLOCK:
                return doc.id
    return None


def _same(a: object, b: object) -> bool:
    """Whether two triggers or action lists say the same (ids aside)."""
    def dump(x: object) -> object:
        if isinstance(x, list):
            return [dump(i) for i in x]
        return x.model_dump(mode="json", exclude={"id"})  # type: ignore[attr-defined]
    return dump(a) == dump(b)


def _put(wanted: Automation) -> str:
    """Create ``wanted``, or update the automation of its name where it differs. One
    already as wanted is left untouched: updating an automation resets the state of its
    triggers on the server, so a proactive trigger counting a run's missed heartbeats
    across a restart of the platform would start over and never fire for that run."""
    try:
        # Outside an event loop ``read`` runs its synchronous version; Prefect's stubs
        # declare only the asynchronous one.
        existing = cast(Automation, Automation.read(name=wanted.name))
    except ValueError:  # not there yet
        wanted.create()
        return f"created {wanted.name!r}"
    if (existing.enabled and existing.description == wanted.description
            and _same(existing.trigger, wanted.trigger)
            and _same(existing.actions, wanted.actions)):
        return f"kept {wanted.name!r}"
    existing.trigger, existing.actions = wanted.trigger, wanted.actions
    existing.description, existing.enabled = wanted.description, True
    existing.update()
    return f"updated {wanted.name!r}"


def ensure(webhook_url: str | None = None) -> list[str]:
    """Create or update the automations; returns what was done, one line each.
    ``webhook_url`` defaults to ``STRATACRAWL_ALERT_WEBHOOK_URL``."""
    heartbeat_s = get_current_settings().flows.heartbeat_frequency or 180
    done = [_put(crash_unresponsive(heartbeat_s))
            + f" (after {MISSED_HEARTBEATS * heartbeat_s} s)"]
    block_id = _alert_block_id(webhook_url or os.environ.get("STRATACRAWL_ALERT_WEBHOOK_URL"))
    if block_id is None:
        done.append(f"no {NOTIFY_ALERTS!r}: set STRATACRAWL_ALERT_WEBHOOK_URL or save a "
                    f"notification block named {ALERT_BLOCK!r}")
    else:
        done.append(_put(notify_alerts(block_id)) + f" (through block {ALERT_BLOCK!r})")
    return done


def ensure_deployed() -> list[str]:
    """The automations that start a deployment, once ``prefect deploy`` made it."""
    with get_client(sync_client=True) as client:
        try:
            repair = client.read_deployment_by_name(REPAIR_DEPLOYMENT)
        except Exception:   # not deployed (another prefect.yaml): nothing to start
            return [f"no {REPAIR_ON_INTEGRITY!r}: no deployment {REPAIR_DEPLOYMENT}"]
    return [_put(repair_on_integrity(repair.id))]


if __name__ == "__main__":
    print("\n".join(ensure()))
