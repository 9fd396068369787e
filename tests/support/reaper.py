"""Nothing a test run starts outlives it.

The servers the tests start — the embedded PostgreSQL, Redis and Elasticsearch API, a whole
test platform (``stratacrawl up``: simulator, Prefect server and worker, ops page) — run in
sessions of their own, as they do in production, so a Ctrl-C in the terminal does not
reach them and a SIGTERM of pytest is not passed on. Their fixtures stop them at the end of
a run; a run stopped by a signal, or killed, never gets there.

So the run's first process marks the environment every process it starts inherits
(``STRATACRAWL_TEST_RUN``) and starts a watcher in a session of its own. The watcher waits
for that process to end (a pidfd: no polling, no mistaking a reused PID) and then ends
every process still carrying the mark: SIGTERM, then SIGKILL to what is left after a grace
period. A run that ended normally has stopped its servers already, and the watcher finds
nothing to do.

Run as a script by :func:`watch_this_run`; loaded as a pytest plugin (``-p
tests.support.reaper``) it starts the watch itself.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

MARK = "STRATACRAWL_TEST_RUN"
GRACE_S = 3.0
PASSES_S = 15.0


def watch_this_run() -> None:
    """Mark this process's environment and start the watcher; a process that carries a
    mark already (an xdist worker, a run's own subprocess) is watched by its run's."""
    if os.environ.get(MARK):
        return
    token = uuid.uuid4().hex
    os.environ[MARK] = token
    env = {k: v for k, v in os.environ.items() if k != MARK}
    subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(os.getpid()), token],
                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def pytest_configure() -> None:
    watch_this_run()


def marked(token: str) -> list[int]:
    """Processes whose environment carries the run's mark (zombies have none)."""
    needle = f"{MARK}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:      # gone meanwhile, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def reap(token: str) -> None:
    """SIGTERM every marked process, SIGKILL what is left after the grace period; again
    while marked processes keep appearing (a dying parent may start one)."""
    deadline = time.monotonic() + PASSES_S
    while (left := marked(token)) and time.monotonic() < deadline:
        _signal(left, signal.SIGTERM)
        grace = time.monotonic() + GRACE_S
        while (left := marked(token)) and time.monotonic() < grace:
            time.sleep(0.1)
        _signal(left, signal.SIGKILL)
        time.sleep(0.1)


def _wait_for_exit(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [])   # readable once the process has ended
    finally:
        os.close(fd)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _wait_for_exit(int(sys.argv[1]))
    reap(sys.argv[2])
