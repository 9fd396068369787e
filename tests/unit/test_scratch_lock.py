"""One run at a time on a scratch set of tiers: a second load test would recreate the
first one's database under it (the first then died with ``AdminShutdown``) and, ending,
stop the embedded servers the first one used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stratacrawl.errors import InUse
from stratacrawl.scratch import exclusive
from tests.support.processes import cli


def test_a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go(
        tmp_path: Path) -> None:
    lock = tmp_path / "scratch" / "loadtest.lock"
    with exclusive(lock, "the scratch tiers 'loadtest'"):
        with pytest.raises(InUse, match=rf"'loadtest' are in use by another run "
                                        rf"\(pid {os.getpid()};"), \
                exclusive(lock, "the scratch tiers 'loadtest'"):
            pass
    with exclusive(lock, "the scratch tiers 'loadtest'"):   # free again
        pass


def test_a_second_load_test_exits_1_naming_the_one_running(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with exclusive(state / "scratch" / "loadtest.lock", "held by this test"):
        done = cli("loadtest", "--minutes", "0.1", "--out", str(tmp_path / "out"),
                   env={"STRATACRAWL_STATE_DIR": str(state)}, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the scratch tiers 'loadtest' (database stratacrawl_loadtest" in done.stderr
    assert f"in use by another run (pid {os.getpid()};" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()   # nothing started
