"""The local Prefect stack of ``stratacrawl up``: a Prefect server with its UI, a
process work pool with one worker, the connection blocks and the deployments of
``prefect.yaml``. Driven through the ``prefect`` command line, so the core never
imports Prefect.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from stratacrawl.errors import ServiceStartError
from stratacrawl.services import Endpoints
from stratacrawl.services.embedded import Registry, Running, recorded_port, terminate
from stratacrawl.stack.lifecycle import PlatformAPI, Reconciled

WORK_POOL = "stratacrawl"
SERVER = "prefect-server"
WORKER = "prefect-worker"
SIMULATOR = "site-simulator"
OPS = "ops-page"
DEMO_SOURCES = "demo-sources.yaml"
DEMO_BACKLOG = 120  # items per simulated site: a demo-sized web
# The demo's sources file: lists fetched again every minute (five at most), and rate alerts
# judged on 5 requests (20 in a sources file's default): a broken demo site shows in the
# next runs and alerts within minutes (`stratacrawl sim break`; docs/operations.md, "See an alert").
DEMO_SOURCES_OPTIONS = ("--cadence", "1m", "--max-interval", "5m", "--alert-min-requests", "5")


def project_root() -> Path:
    """The folder holding ``prefect.yaml``: ``STRATACRAWL_PROJECT_DIR`` if set, else the
    working directory, else the checkout this package is installed from."""
    configured = os.environ.get("STRATACRAWL_PROJECT_DIR")
    candidates = [Path(configured)] if configured else []
    for candidate in (*candidates, Path.cwd(), Path(__file__).resolve().parents[3]):
        if (candidate / "prefect.yaml").exists():
            return candidate.resolve()
    raise ServiceStartError("Prefect", None, "no prefect.yaml in the working directory")


def set_project_directory() -> dict[str, str]:
    """The pull step of ``prefect.yaml``: a flow run starts in the project folder of the
    worker that runs it (found when the run starts, so a deployment made on one host or
    checkout runs from any other). Returns what Prefect's own ``set_working_directory``
    step returns."""
    root = project_root()
    os.chdir(root)
    return {"directory": str(root)}


HEARTBEAT_S = 30


def prefect_env(state_dir: Path, endpoints: Endpoints | None, port: int = 4200) -> dict[str, str]:
    """Environment for Prefect processes: offline, state in our folder, our tiers."""
    env = dict(os.environ)
    env.update({
        "PREFECT_HOME": str(state_dir / "prefect"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_UI_ENABLED": "true",
        "STRATACRAWL_STATE_DIR": str(state_dir),
        "GX_ANALYTICS_ENABLED": "false",
    })
    # Flow runs heartbeat this often; three missed and the server's automation
    # (deployments/automations.py) marks the run Crashed. Prefect's default is 180 s.
    env.setdefault("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", str(HEARTBEAT_S))
    # Deployment concurrency slots are leased; Prefect keeps the leases in the server's
    # memory by default, so a restarted server forgot them while its database still
    # counted the slots taken — and the limit cancelled every later run. On disk (under
    # PREFECT_HOME) they survive a restart and expire when nobody renews them.
    env.setdefault("PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE",
                   "prefect.server.concurrency.lease_storage.filesystem")
    if endpoints is not None:
        env.update({
            "STRATACRAWL_REDIS_URL": endpoints.redis_url,
            "STRATACRAWL_ELASTICSEARCH_URL": endpoints.elasticsearch_url,
            "STRATACRAWL_DATABASE_URL": endpoints.database_url,
        })
        if "elasticsearch" in endpoints.embedded:
            env["STRATACRAWL_ES_PLAIN_JSON"] = "true"
    return env


PLATFORM = "platform.json"   # what `up` runs: its sources file and addresses


def record_platform(state_dir: Path, **facts: str | None) -> None:
    """What ``up`` started (sources file, addresses), for the CLI to find without being told."""
    (state_dir / PLATFORM).write_text(json.dumps(facts, indent=2))


def platform_record(state_dir: Path) -> dict[str, str | None] | None:
    """What the running platform recorded (None: no platform started with ``up`` here)."""
    try:
        data = json.loads((state_dir / PLATFORM).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def forget_platform(state_dir: Path) -> None:
    (state_dir / PLATFORM).unlink(missing_ok=True)


def _prefect(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefect", *args]


class LocalStack:
    """Start and stop the local Prefect server and worker, recorded in the registry."""

    def __init__(self, state_dir: Path, port: int = 4200) -> None:
        self.state_dir = state_dir
        self.port = port
        self.registry = Registry(state_dir)
        self.log_dir = state_dir / "prefect"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _spawn(self, name: str, args: list[str], env: dict[str, str], cwd: Path) -> int:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return proc.pid

    @property
    def worker_name(self) -> str:
        """This platform's worker, named so the server's list of workers tells it apart
        from other hosts' workers of the pool."""
        folder = hashlib.sha1(str(self.state_dir.resolve()).encode()).hexdigest()[:8]
        return f"stratacrawl-{socket.gethostname()}-{folder}"

    @contextlib.contextmanager
    def api(self) -> Iterator[PlatformAPI]:
        """The server's REST API; an HTTP failure on it is a :class:`ServiceStartError`."""
        try:
            with PlatformAPI(self.api_url) as api:
                yield api
        except httpx.HTTPError as e:
            raise ServiceStartError("Prefect", self.api_url, f"{type(e).__name__}: {e}") from e

    def healthy(self, timeout: float = 2.0) -> bool:
        try:
            return httpx.get(f"{self.api_url}/health", timeout=timeout).status_code == 200
        except httpx.HTTPError:
            return False

    def check_server(self, *, take_over: bool = False) -> None:
        """Raise :class:`NotOurServer` when a Prefect server answers on the port that
        another platform owns, or none (not started by ``up``), unless ``take_over``."""
        if take_over or not self.healthy():
            return
        with self.api() as api:
            api.check_owner(self.state_dir, ours=self.registry.alive(SERVER) is not None)

    def start_server(self, env: dict[str, str], wait_s: float = 90.0) -> Running:
        """This platform's server (see :meth:`check_server` first), started unless one
        answers on the port."""
        running = self.registry.alive(SERVER)
        if self.healthy():
            return running or Running(SERVER, 0, self.api_url)
        pid = self._spawn(SERVER, _prefect("server", "start", "--host", "127.0.0.1",
                                           "--port", str(self.port)), env, self.state_dir)
        running = Running(SERVER, pid, self.api_url)
        self.registry.put(running)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.healthy():
                return running
            time.sleep(0.5)
        self.stop()
        raise ServiceStartError("Prefect", self.api_url,
                                f"server not healthy after {wait_s:.0f} s; see {self.log_dir}")

    def run(self, args: list[str], env: dict[str, str], cwd: Path) -> str:
        """Run a ``prefect``/python command to completion; raise with its output on failure."""
        done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise ServiceStartError("Prefect", self.api_url,
                                    f"{' '.join(args[2:])} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def ensure_pool(self, env: dict[str, str], cwd: Path) -> None:
        done = subprocess.run(_prefect("work-pool", "inspect", WORK_POOL), env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            self.run(_prefect("work-pool", "create", WORK_POOL, "--type", "process"), env, cwd)

    def claim(self) -> dict[str, str] | None:
        """Record this platform as its server's owner; the owner it replaced, if any."""
        with self.api() as api:
            return api.claim(self.state_dir)

    def reconcile(self, why: str, *, missed: bool = True) -> Reconciled:
        """Runs this platform's last life left unfinished → Crashed; with ``missed``,
        scheduled runs it missed while stopped → Cancelled (see ``stack.lifecycle``)."""
        with self.api() as api:
            return api.reconcile(WORK_POOL, self.worker_name, why, missed=missed)

    def start_worker(self, env: dict[str, str], cwd: Path) -> Running:
        running = self.registry.alive(WORKER)
        if running:
            return running
        pid = self._spawn(WORKER, _prefect("worker", "start", "--pool", WORK_POOL,
                                           "--type", "process", "--name", self.worker_name),
                          env, cwd)
        running = Running(WORKER, pid, self.api_url)
        self.registry.put(running)
        return running

    def start_simulator(self, env: dict[str, str], sources: int,
                        wait_s: float = 60.0) -> tuple[Running, Path]:
        """The site simulator of ``up --demo`` (``stratacrawl sim serve``) and the sources
        file it writes for its sites (anew at each start: its ports change)."""
        sources_file = self.state_dir / DEMO_SOURCES
        running = self.registry.alive(SIMULATOR)
        if running and sources_file.exists():
            return running, sources_file
        sources_file.unlink(missing_ok=True)
        pid = self._spawn(SIMULATOR, [sys.executable, "-m", "stratacrawl", "sim", "serve",
                                      "--sources", str(sources), "--backlog", str(DEMO_BACKLOG),
                                      "--port", str(self._simulator_port(sources)),
                                      "--write-sources", str(sources_file), "--json",
                                      *DEMO_SOURCES_OPTIONS],
                          env, self.state_dir)
        running = Running(SIMULATOR, pid, str(sources_file))
        self.registry.put(running)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if sources_file.exists() and sources_file.stat().st_size:
                return running, sources_file
            if self.registry.alive(SIMULATOR) is None:
                break
            time.sleep(0.2)
        self.stop()
        raise ServiceStartError("site simulator", None, f"no {DEMO_SOURCES} after {wait_s:.0f} "
                                f"s; see {self.log_dir / (SIMULATOR + '.log')}")

    def start_ops(self, env: dict[str, str], port: int, sources: Path,
                  wait_s: float = 60.0) -> str:
        """The ops page (``stratacrawl ops``), which also serves the Data Docs under
        ``/docs/``; returns its address once it answers."""
        url = f"http://127.0.0.1:{port}"
        running = self.registry.alive(OPS)
        if running and running.url == url:
            return url
        if running:
            terminate(running.pid, timeout=8, group=True)
        pid = self._spawn(OPS, [sys.executable, "-m", "stratacrawl", "ops", "--port", str(port),
                                "--sources", str(sources)], env, self.state_dir)
        self.registry.put(Running(OPS, pid, url))
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/docs", timeout=2, follow_redirects=False).status_code == 302:
                    return url
            except httpx.HTTPError:
                pass
            if self.registry.alive(OPS) is None:
                break
            time.sleep(0.3)
        raise ServiceStartError("ops page", url, f"not answering after {wait_s:.0f} s; see "
                                f"{self.log_dir / (OPS + '.log')}")

    def _simulator_port(self, sources: int) -> int:
        """The first port of the demo's sites: the one they had before when those ports
        are free, so a simulator started again answers where the ledger's URLs point (on
        new ports, the platform fetched the old addresses and counted connect errors)."""
        return recorded_port(self.state_dir / "simulator-port", sources)

    def stop(self) -> tuple[list[str], Reconciled | None]:
        """Worker first (it may ignore the first SIGTERM: escalate to SIGINT; its flow
        runs go with it), then the runs it left unfinished are marked Crashed while the
        server still answers, then the server, the ops page and the demo's simulator.
        Returns what was stopped and what was reconciled (None: no server of ours)."""
        stopped = []
        reconciled = None
        for name in (WORKER, SERVER, OPS, SIMULATOR):
            running = self.registry.alive(name)
            self.registry.drop(name)
            if name == SERVER and running and self.healthy():
                try:
                    reconciled = self.reconcile("stopped by `stratacrawl down`", missed=False)
                except ServiceStartError:   # `up` reconciles what is left
                    pass
            if running:
                terminate(running.pid, timeout=8,
                          signals=(signal.SIGTERM, signal.SIGINT, signal.SIGKILL), group=True)
                stopped.append(name)
        return stopped, reconciled
