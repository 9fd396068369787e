"""Helpers shared by tests: running the CLI as users do, finding leftover processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``stratacrawl ARGS`` in a subprocess (what a user types)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "stratacrawl", *args], env=full_env,
                          cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout)


def processes_under(folder: Path) -> list[str]:
    """Command lines of live processes that mention ``folder`` (our state folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (proc / "stat").read_text()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if stat.split(") ", 1)[1].startswith("Z"):
            continue
        if str(folder) in cmd or cwd.startswith(str(folder)):
            found.append(cmd.strip())
    return found
