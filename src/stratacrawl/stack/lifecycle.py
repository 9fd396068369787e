"""A platform's life on its Prefect server, through Prefect's REST API (the core never
imports Prefect).

**Ownership.** A platform is a state folder plus the Prefect server it owns: ``up``
records the state folder in the Prefect variable :data:`OWNER_VARIABLE`, and a platform
started from another state folder finds it there and refuses to adopt that server (its
blocks, deployments and work pool would be rewritten, and its worker would run the other
platform's runs) unless told to take it over.

**Reconciliation.** A run whose process died with the platform (``down`` mid-run, kill -9,
a reboot) stays Running on the server: it holds a slot of its deployment's concurrency
limit, so every later run of that deployment is cancelled ("Deployment concurrency limit
reached"), and nothing says so. ``down`` (after its worker stopped) and ``up`` (before a
worker starts) mark such runs Crashed with a message saying why — forced, which releases
their slots — and a run that was scheduled while the platform was stopped is Cancelled as
missed (all but the newest of each deployment, which runs now), instead of a burst of
late runs colliding with the limit.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil

OWNER_VARIABLE = "stratacrawl_platform"
UNFINISHED = ["RUNNING", "PENDING", "CANCELLING"]
# A scheduled run this late when a platform starts was due while it was stopped.
MISSED_AFTER = timedelta(seconds=90)
RETRY_S = 30.0


class NotOurServer(Exception):
    """The Prefect server on the port belongs to another platform (or to none)."""

    def __init__(self, url: str, owner: dict[str, Any] | None) -> None:
        self.url = url
        self.owner = owner
        who = (f"the platform of {owner.get('state_dir')} (host {owner.get('host')})"
               if owner else "no Stratacrawl platform (it was not started by `stratacrawl up`)")
        super().__init__(f"the Prefect server at {url} belongs to {who}")


@dataclass
class Reconciled:
    crashed: list[str] = field(default_factory=list)    # "deployment/run-name (state)"
    missed: list[str] = field(default_factory=list)     # scheduled runs cancelled as missed
    left: int = 0        # unfinished runs of other online workers, left to their heartbeats

    def lines(self) -> list[str]:
        out = []
        if self.crashed:
            out.append(f"marked Crashed (their process is gone): {', '.join(self.crashed)}")
        if self.missed:
            out.append(f"cancelled as missed while stopped: {len(self.missed)} scheduled "
                       "run(s)")
        if self.left:
            out.append(f"{self.left} unfinished run(s) of other online workers left to "
                       "the heartbeat automation")
        return out


def process_alive(pid: str | None) -> bool:
    """Whether ``pid`` (a flow run's ``infrastructure_pid``) is a live Prefect process on
    this host (a reused pid running something else is not)."""
    if not pid or not pid.isdigit():
        return False
    try:
        cmdline = " ".join(psutil.Process(int(pid)).cmdline())
    except (psutil.Error, OSError):
        return False
    return "prefect" in cmdline


class _Retrying(httpx.HTTPTransport):
    """A server that just started (or restarted after a kill) answers its health check
    before every service is up, and its SQLite database may be locked for a moment:
    5xx answers and refused connections are tried again for up to ``RETRY_S``."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + RETRY_S
        wait = 0.25
        while True:
            try:
                response = super().handle_request(request)
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
            else:
                if response.status_code < 500 or time.monotonic() > deadline:
                    return response
                response.close()
            time.sleep(wait)
            wait = min(wait * 2, 2.0)


class PlatformAPI:
    """The Prefect REST calls of a platform's life cycle, against ``api_url``."""

    def __init__(self, api_url: str, timeout: float = 15.0) -> None:
        self.api_url = api_url
        self.http = httpx.Client(base_url=api_url, timeout=timeout, transport=_Retrying())

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> PlatformAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ownership ---------------------------------------------------------------------
    def owner(self) -> dict[str, Any] | None:
        resp = self.http.get(f"/variables/name/{OWNER_VARIABLE}")
        if resp.status_code == 404:
            return None
        resp.raise_for_status()
        value = resp.json().get("value")
        return value if isinstance(value, dict) else None

    def check_owner(self, state_dir: Path, *, ours: bool) -> None:
        """Raise :class:`NotOurServer` unless the server is this platform's: recorded as
        ``state_dir``'s, or unrecorded and started by this platform (``ours``)."""
        owner = self.owner()
        if owner is None and ours:
            return
        if owner is None or owner.get("state_dir") != str(state_dir.resolve()):
            raise NotOurServer(self.api_url, owner)

    def claim(self, state_dir: Path) -> dict[str, Any] | None:
        """Record ``state_dir`` as the server's owner; returns the owner it replaced."""
        before = self.owner()
        value = {"state_dir": str(state_dir.resolve()), "host": socket.gethostname(),
                 "since": datetime.now(UTC).isoformat(timespec="seconds")}
        if before is None:
            self.http.post("/variables/", json={"name": OWNER_VARIABLE, "value": value,
                                                 "tags": ["stratacrawl"]}).raise_for_status()
        else:
            self.http.patch(f"/variables/name/{OWNER_VARIABLE}",
                            json={"value": value}).raise_for_status()
        return before if before and before.get("state_dir") != value["state_dir"] else None

    # -- reconciliation ----------------------------------------------------------------
    def _runs(self, pool: str, states: list[str]) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = []
        while True:
            page = self.http.post("/flow_runs/filter", json={
                "flow_runs": {"state": {"type": {"any_": states}}},
                "work_pools": {"name": {"any_": [pool]}},
                "sort": "EXPECTED_START_TIME_DESC", "limit": 200, "offset": len(runs)})
            page.raise_for_status()
            batch = page.json()
            runs += batch
            if len(batch) < 200:
                return runs

    def _deployments(self) -> dict[str, str]:
        resp = self.http.post("/deployments/filter", json={})
        resp.raise_for_status()
        return {d["id"]: d["name"] for d in resp.json()}

    def workers_online(self, pool: str) -> set[str]:
        resp = self.http.post(f"/work_pools/{pool}/workers/filter", json={})
        if resp.status_code == 404:
            return set()
        resp.raise_for_status()
        return {w["name"] for w in resp.json() if w.get("status") == "ONLINE"}

    def paused_runs(self, deployment: str, **parameters: Any) -> list[dict[str, Any]]:
        """The paused runs of ``deployment`` (``flow/deployment`` name's last part) whose
        parameters include ``parameters``."""
        resp = self.http.post("/flow_runs/filter", json={
            "flow_runs": {"state": {"type": {"any_": ["PAUSED"]}}},
            "deployments": {"name": {"any_": [deployment]}}})
        resp.raise_for_status()
        wanted = parameters.items()
        return [run for run in resp.json() if wanted <= (run.get("parameters") or {}).items()]

    def resume(self, run_id: str, run_input: dict[str, Any]) -> str:
        """Resume a paused run with ``run_input`` (what its form asks for); returns the
        server's answer (``ACCEPT``, or why not)."""
        resp = self.http.post(f"/flow_runs/{run_id}/resume", json={"run_input": run_input})
        resp.raise_for_status()
        body = resp.json()
        return str(body.get("status")) + (f": {body['details']}" if body.get("details") else "")

    def set_state(self, run_id: str, state: str, message: str) -> None:
        self.http.post(f"/flow_runs/{run_id}/set_state", json={
            "state": {"type": state, "message": message}, "force": True}).raise_for_status()

    def reconcile(self, pool: str, own_worker: str, why: str, *,
                  missed: bool = True) -> Reconciled:
        """Unfinished runs of ``pool`` whose process is gone → Crashed (``why`` in the
        message); with ``missed``, scheduled runs missed while stopped → Cancelled (the
        newest of each deployment kept). Runs taken by another worker that is online
        (another host's) are left to the heartbeat automation."""
        done = Reconciled()
        names = self._deployments()
        others = self.workers_online(pool) - {own_worker}
        for run in self._runs(pool, UNFINISHED):
            if (run.get("labels") or {}).get("prefect.worker.name") in others:
                done.left += 1    # alive elsewhere, maybe: its heartbeats tell
                continue
            if process_alive(run.get("infrastructure_pid")):
                continue
            state = run["state"]["type"]
            self.set_state(run["id"], "CRASHED",
                           f"Its process is gone ({why}); marked Crashed so the run's "
                           "concurrency slot is free. Its leased tasks go back to the queue.")
            done.crashed.append(f"{names.get(run.get('deployment_id') or '', '?')}/"
                                f"{run['name']} ({state.lower()})")
        if not missed:
            return done
        cutoff = datetime.now(UTC) - MISSED_AFTER
        newest: set[str] = set()
        for run in self._runs(pool, ["SCHEDULED"]):   # newest first
            expected = run.get("expected_start_time") or run.get("next_scheduled_start_time")
            if not expected or datetime.fromisoformat(expected) > cutoff:
                continue
            deployment = run.get("deployment_id") or ""
            if deployment not in newest:
                newest.add(deployment)   # the newest missed run of each runs now
                continue
            self.set_state(run["id"], "CANCELLED",
                           f"Missed: due at {expected[:19]}Z while the platform was stopped; "
                           "a later run of the deployment does its work.")
            done.missed.append(run["name"])
        return done
