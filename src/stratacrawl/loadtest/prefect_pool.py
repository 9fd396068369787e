"""The load test through Prefect: a Prefect server, the ``stratacrawl`` process work pool,
one Prefect worker per simulated host (each polls a work queue of its own), and the
``fetch`` and ``cleaning`` deployments of ``prefect.yaml`` run on them as flow runs.

This is the path a user who outgrows one machine takes (docs/operations.md: "Several hosts"): the
workers here are ``prefect worker start`` processes, their flow runs are subprocesses
the workers start, and killing a "host" kills the worker and its flow run together.
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from stratacrawl.errors import ServiceStartError
from stratacrawl.loadtest.processes import ChildProcess
from stratacrawl.services.embedded import free_port
from stratacrawl.stack import HEARTBEAT_S, WORK_POOL, LocalStack, prefect_env, project_root

log = logging.getLogger(__name__)
# Workers look for new flow runs this often (Prefect's default is 10 s).
WORKER_POLL_S = 2
DEPLOYMENTS = ("fetch", "cleaning")
# deployments/automations.py marks a run Crashed after three missed heartbeats; the load
# test waits that long (and a little more) after a kill to report it.
CRASH_DETECTION_S = 3 * HEARTBEAT_S + 30


class PrefectPool:
    """Server, work pool, deployments and flow runs of one load test."""

    def __init__(self, state_dir: Path, env: dict[str, str]) -> None:
        self.stack = LocalStack(state_dir, free_port())
        self.root = project_root()
        self.env = {**prefect_env(state_dir, None, self.stack.port), **env,
                    "PREFECT_WORKER_QUERY_SECONDS": str(WORKER_POLL_S),
                    "PREFECT_LOGGING_LEVEL": "WARNING"}
        self.runs: dict[str, str] = {}  # worker (work queue) name -> its flow run id
        self._deployments: dict[str, str] = {}

    def start(self) -> int:
        """Server up, the process work pool, the automations, the two deployments; returns
        the server's pid."""
        server = self.stack.start_server(self.env)
        self.stack.ensure_pool(self.env, self.root)
        # a killed host's flow run is marked Crashed after three missed heartbeats
        self.stack.run([sys.executable, "-m", "deployments.automations"], self.env, self.root)
        args = [sys.executable, "-m", "prefect", "--no-prompt", "deploy"]
        for name in DEPLOYMENTS:
            args += ["--name", name]
        self.stack.run(args, self.env, self.root)
        with httpx.Client(base_url=self.stack.api_url, timeout=30) as api:
            for name in DEPLOYMENTS:
                resp = api.get(f"/deployments/name/{name}/{name}")
                resp.raise_for_status()
                self._deployments[name] = resp.json()["id"]
        return server.pid

    def worker(self, name: str, logs: Path, nice: int = 0) -> ChildProcess:
        """A Prefect worker of the pool that takes flow runs from queue ``name`` only."""
        return ChildProcess(name, ["worker", "start", "--pool", WORK_POOL, "--type", "process",
                                   "--work-queue", name, "--name", name, "--limit", "1"],
                            self.env, logs / f"{name}.log", nice=nice, module="prefect",
                            tree=True)

    def submit(self, deployment: str, queue: str, parameters: dict[str, Any]) -> str:
        """A flow run of ``deployment`` for the worker polling ``queue``; returns its id.
        The server's scheduler writes to the same SQLite file: a create may be refused
        for a moment, so it is tried a few times."""
        body = {"parameters": parameters, "work_queue_name": queue}
        last = ""
        with httpx.Client(base_url=self.stack.api_url, timeout=30) as api:
            for _ in range(20):
                resp = api.post(f"/deployments/{self._deployments[deployment]}/create_flow_run",
                                json=body)
                if resp.status_code < 300:
                    run_id = str(resp.json()["id"])
                    self.runs[queue] = run_id
                    return run_id
                last = f"{resp.status_code} {resp.text[:300]}"
                time.sleep(1)
        raise ServiceStartError("Prefect", self.stack.api_url,
                                f"cannot create a {deployment} flow run: {last}")

    def states(self) -> dict[str, str]:
        """Worker name -> the state of its flow run (COMPLETED, CRASHED, RUNNING...)."""
        out = {}
        with httpx.Client(base_url=self.stack.api_url, timeout=30) as api:
            for queue, run_id in self.runs.items():
                try:
                    state = api.get(f"/flow_runs/{run_id}").json().get("state") or {}
                    out[queue] = str(state.get("type", "UNKNOWN"))
                except (httpx.HTTPError, ValueError):
                    out[queue] = "UNKNOWN"
        return out

    def await_finished(self, queues: list[str], deadline: float) -> None:
        """Wait (until ``deadline``, wall-clock) for the flow runs of ``queues`` to reach a
        final state: a run prints its final report before its task run, artifacts and
        connections are closed, and stopping its worker then would kill it mid-way."""
        final = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
        while time.time() < deadline:
            states = self.states()
            if all(states.get(q) in final for q in queues):
                return
            time.sleep(1)

    def await_crashed(self, queue: str, deadline: float) -> float | None:
        """Wait (until ``deadline``, wall-clock) for the server's automation to mark the
        flow run of ``queue`` Crashed after its process was killed; returns the wall-clock
        time of the Crashed state (from the server, however late it is asked) or None."""
        while True:
            with httpx.Client(base_url=self.stack.api_url, timeout=30) as api:
                try:
                    state = api.get(f"/flow_runs/{self.runs[queue]}").json().get("state") or {}
                except (httpx.HTTPError, ValueError, KeyError):
                    state = {}
            if state.get("type") == "CRASHED" and state.get("timestamp"):
                return datetime.fromisoformat(state["timestamp"]).timestamp()
            if time.time() >= deadline:
                return None
            time.sleep(2)

    def stop(self) -> None:
        self.stack.stop()
