"""Cleaner processes: what a spawned child imports before it cleans."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stratacrawl.clean.parallel import default_processes

ROOT = Path(__file__).resolve().parents[3]

MAIN = textwrap.dedent('''
    import os
    with open(os.environ["MARKS"], "a") as f:   # every import of this module leaves a mark
        f.write(__name__ + "\\n")
    if __name__ == "__main__":
        import multiprocessing, sys
        from concurrent.futures import ProcessPoolExecutor
        from stratacrawl.clean.parallel import main_module_left_out
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            if sys.argv[1] == "left-out":
                with main_module_left_out():
                    child = ex.submit(os.getpid)
            else:
                child = ex.submit(os.getpid)
            assert child.result() != os.getpid()
        main = sys.modules["__main__"]
        assert main.__spec__.name == "cleanermain" and main.__file__.endswith("cleanermain.py")
''')


@pytest.mark.parametrize(("how", "marks"), [("left-out", ["__main__"]),
                                            ("plain", ["__main__", "__mp_main__"])])
def test_a_spawned_cleaner_does_not_import_the_main_module_again(
        tmp_path: Path, how: str, marks: list[str]) -> None:
    """Run as ``python -m`` (as Prefect's process worker runs its engine), a parent's
    main module is imported again by every spawned child unless the children start
    inside ``main_module_left_out``, which puts the module's name and path back after."""
    (tmp_path / "cleanermain.py").write_text(MAIN)
    env = {**os.environ, "MARKS": str(tmp_path / "marks"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src"), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "cleanermain", how], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "marks").read_text().split() == marks


def test_default_processes_leave_a_core_to_fetching() -> None:
    assert [default_processes(n) for n in (1, 2, 8)] == [1, 1, 7]
