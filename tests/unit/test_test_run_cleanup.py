"""A test run stopped by a signal leaves nothing running: the servers its tests started in
sessions of their own end with it (``tests/support/reaper.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stratacrawl.services.embedded import pid_alive
from tests.support import reaper

ROOT = Path(__file__).resolve().parents[2]

INNER = '''
import time
from pathlib import Path

from stratacrawl.services.embedded import EmbeddedElasticsearch


def test_starts_a_server_and_hangs(tmp_path):
    running, _ = EmbeddedElasticsearch(tmp_path).ensure()   # its own session, like up's
    Path({pid_file!r}).write_text(str(running.pid))
    time.sleep(600)
'''


@pytest.mark.slow   # (a pytest run and a server in subprocesses)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_server_a_test_started_ends_with_a_run_stopped_by_a_signal(
        tmp_path: Path, signum: int) -> None:
    pid_file = tmp_path / "server.pid"
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER.format(pid_file=str(pid_file))))
    env = {k: v for k, v in os.environ.items() if k != reaper.MARK}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.reaper", "--noconftest",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not pid_file.exists():
            assert run.poll() is None, "the inner run ended before its server answered"
            time.sleep(0.1)
        server = int(pid_file.read_text())
        assert pid_alive(server)
        assert os.getsid(server) != os.getsid(run.pid)   # out of reach of the run's signals

        run.send_signal(signum)
        run.wait(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and pid_alive(server):
            time.sleep(0.1)
        assert not pid_alive(server), "the server outlived the test run"
    finally:
        if run.poll() is None:
            run.kill()
        if server is not None and pid_alive(server):
            os.kill(server, signal.SIGKILL)
