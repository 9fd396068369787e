"""Worker processes of a load test: ``stratacrawl crawl --json`` and ``stratacrawl clean``
(or Prefect workers whose flow runs print the same lines), each its own OS process on the
shared tiers, with their progress lines, CPU and memory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

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
    the simulator, a server). With ``tree``, its descendants count too (a Prefect worker
    and the flow run it started): CPU summed (children seen once are remembered when
    they end), RSS of the largest process."""

    def __init__(self, pid: int, tree: bool = False) -> None:
        self.usage = Usage()
        self._ps = psutil.Process(pid)
        self._tree = tree
        self._cpu: dict[int, float] = {}  # per process seen: its CPU seconds so far
        self._started = time.monotonic()

    def sample(self) -> None:
        with contextlib.suppress(psutil.Error):
            procs = [self._ps, *(self._ps.children(recursive=True) if self._tree else ())]
            rss = 0.0
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    cpu = p.cpu_times()
                    self._cpu[p.pid] = cpu.user + cpu.system
                    rss = max(rss, p.memory_info().rss / 2**20)
            self.usage.cpu_seconds = sum(self._cpu.values())
            self.usage.wall_seconds = time.monotonic() - self._started
            self.usage.peak_rss_mb = max(self.usage.peak_rss_mb, rss)


@dataclass
class ChildProcess:
    """A ``python -m <module>`` subprocess whose stdout carries JSON lines; ``nice`` lowers
    its CPU priority (the cleaner: it may lag, staging holds its backlog); ``tree``: it
    starts processes of its own (a Prefect worker), which are measured and killed with it.
    Non-JSON lines on stdout (a Prefect worker's own messages) go to its log."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    nice: int = 0
    module: str = "stratacrawl"
    tree: bool = False
    lines: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False
    _proc: subprocess.Popen[str] | None = None
    _probe: UsageProbe | None = None
    _log: TextIO | None = None
    started_at: float | None = None  # monotonic, when the process was started

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        self.started_at = time.monotonic()
        self._proc = subprocess.Popen([sys.executable, "-m", self.module, *self.args],
                                      stdout=subprocess.PIPE, stderr=self._log, text=True,
                                      env=self.env, start_new_session=self.tree,
                                      preexec_fn=(lambda: os.nice(self.nice)) if self.nice
                                      else None)
        self._probe = UsageProbe(self._proc.pid, tree=self.tree)
        threading.Thread(target=self._read, daemon=True, name=f"read-{self.name}").start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        assert self._log is not None  # both opened by start()
        log = self._log
        for raw in self._proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = None
            if isinstance(line, dict):
                self.lines.append({"at": time.monotonic(), **line})
            elif raw.strip():
                with contextlib.suppress(ValueError):  # closed at the end of the run
                    log.write(raw)
                    log.flush()

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def running(self) -> bool:
        """Still working: alive and its final report not printed yet (a Prefect worker
        stays alive after its flow run ended)."""
        return self.alive and self.final is None

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
        """kill -9 (of the process and everything it started): no clean-up, leases left
        behind (the fault the test is about)."""
        self.sample()
        if self._proc is not None and self.alive:
            victims = [self._proc.pid]
            if self.tree:
                with contextlib.suppress(psutil.Error):
                    victims += [p.pid for p in psutil.Process(self._proc.pid).children(
                        recursive=True)]
            for pid in victims:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._proc.wait()
            self.killed = True

    def wait(self, timeout: float) -> int | None:
        """Wait for it to end (a Prefect worker whose flow run is done is stopped at once:
        it would poll for more work for ever), then terminate what is left."""
        if self._proc is None:
            return None
        try:
            if self.tree and self.final is not None:
                raise subprocess.TimeoutExpired(self._proc.args, 0)
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGTERM)
            try:
                return self._proc.wait(15)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                return self._proc.wait()
        finally:
            if self.tree:  # its flow run, had it outlived the worker
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.tree:
                os.killpg(self._proc.pid, sig)
            else:
                self._proc.send_signal(sig)


def crawl_worker(name: str, sources: Path, seconds: float, env: dict[str, str],
                 logs: Path) -> ChildProcess:
    return ChildProcess(name, ["crawl", "--sources", str(sources), "--forever", "--seconds",
                               f"{seconds:.0f}", "--worker-id", name, "--json"],
                        env, logs / f"{name}.log")


def cleaner(name: str, sources: Path, seconds: float, env: dict[str, str],
            logs: Path) -> ChildProcess:
    return ChildProcess(name, ["clean", "--sources", str(sources), "--follow", "--seconds",
                               f"{seconds:.0f}"], env, logs / f"{name}.log", nice=CLEANER_NICE)
