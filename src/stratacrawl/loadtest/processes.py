"""Worker processes of a load test: ``stratacrawl crawl --json`` and ``stratacrawl clean``,
each its own OS process on the shared tiers, with their progress lines, CPU and memory."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

CLEANER_NICE = 10  # fetching first; cleaning takes the CPU left over and catches up after


@dataclass
class Usage:
    """CPU (% of one core, mean over the run) and memory (peak RSS) of one process."""

    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    peak_rss_mb: float = 0.0

    @property
    def cpu_percent(self) -> float:
        return 100.0 * self.cpu_seconds / self.wall_seconds if self.wall_seconds else 0.0


class UsageProbe:
    """Samples one process's CPU time and peak RSS from outside (any process: a worker,
    the simulator, a server)."""

    def __init__(self, pid: int) -> None:
        self.usage = Usage()
        self._ps = psutil.Process(pid)
        self._started = time.monotonic()

    def sample(self) -> None:
        with contextlib.suppress(psutil.Error):
            cpu = self._ps.cpu_times()
            self.usage.cpu_seconds = cpu.user + cpu.system
            self.usage.wall_seconds = time.monotonic() - self._started
            self.usage.peak_rss_mb = max(self.usage.peak_rss_mb,
                                         self._ps.memory_info().rss / 2**20)


@dataclass
class ChildProcess:
    """A ``stratacrawl`` subprocess whose stdout carries JSON lines; ``nice`` lowers its CPU
    priority (the cleaner: it may lag, staging holds its backlog)."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    nice: int = 0
    lines: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False
    _proc: subprocess.Popen[str] | None = None
    _probe: UsageProbe | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("w")
        self._proc = subprocess.Popen([sys.executable, "-m", "stratacrawl", *self.args],
                                      stdout=subprocess.PIPE, stderr=log, text=True, env=self.env,
                                      preexec_fn=(lambda: os.nice(self.nice)) if self.nice
                                      else None)
        self._probe = UsageProbe(self._proc.pid)
        threading.Thread(target=self._read, daemon=True, name=f"read-{self.name}").start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append({"at": time.monotonic(), **json.loads(raw)})

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def usage(self) -> Usage:
        return self._probe.usage if self._probe is not None else Usage()

    def sample(self) -> None:
        """Fold the process's CPU time and memory so far into :attr:`usage`."""
        if self._probe is not None and self.alive:
            self._probe.sample()

    def latest(self) -> dict[str, Any]:
        """The last progress line (``{}`` before the first)."""
        progress = [ln for ln in self.lines[-3:] if "t" in ln]
        return progress[-1] if progress else {}

    @property
    def final(self) -> dict[str, Any] | None:
        return next((ln for ln in reversed(self.lines) if ln.get("final")), None)

    def kill(self) -> None:
        """kill -9: no clean-up, leases left behind (the fault the test is about)."""
        self.sample()
        if self._proc is not None and self.alive:
            self._proc.kill()
            self._proc.wait()
            self.killed = True

    def wait(self, timeout: float) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.terminate()
            try:
                return self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                return self._proc.wait()


def crawl_worker(name: str, sources: Path, seconds: float, env: dict[str, str],
                 logs: Path) -> ChildProcess:
    return ChildProcess(name, ["crawl", "--sources", str(sources), "--forever", "--seconds",
                               f"{seconds:.0f}", "--worker-id", name, "--json"],
                        env, logs / f"{name}.log")


def cleaner(name: str, sources: Path, seconds: float, env: dict[str, str],
            logs: Path) -> ChildProcess:
    return ChildProcess(name, ["clean", "--sources", str(sources), "--follow", "--seconds",
                               f"{seconds:.0f}"], env, logs / f"{name}.log", nice=CLEANER_NICE)
