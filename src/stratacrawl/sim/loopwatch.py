"""How late the simulator's event loop runs: a reader of its per-second arrival counts
needs to know when the stamping itself was late."""

from __future__ import annotations

import asyncio
import time

from stratacrawl.process.gctune import GcPauses


class LoopWatch:
    """How late the simulator's event loop runs, as the worst lag in each wall-clock
    second. Arrivals are stamped when a handler runs: in a second after a stall, requests
    that arrived during it are stamped together, so a reader of the per-second counts
    needs to know when the stamping itself was late."""

    EVERY_S = 0.02
    KEEP_S = 3700

    def __init__(self) -> None:
        self.per_second: dict[int, float] = {}
        self.gc = GcPauses()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.gc.install()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        self.gc.uninstall()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            due = time.monotonic() + self.EVERY_S
            await asyncio.sleep(self.EVERY_S)
            self.record(time.time(), time.monotonic() - due)

    def record(self, at: float, lag_s: float) -> None:
        second = int(at)
        if lag_s > self.per_second.get(second, 0.0):
            self.per_second[second] = lag_s
            if len(self.per_second) > self.KEEP_S:
                for old in sorted(self.per_second)[:100]:
                    del self.per_second[old]

    def recent_ms(self, seconds: int = 600, above_ms: float = 5.0) -> dict[str, float]:
        """Seconds (of the last ``seconds``) whose worst lag passed ``above_ms``."""
        floor = int(time.time()) - seconds
        return {str(k): round(v * 1000, 1) for k, v in sorted(self.per_second.items())
                if k >= floor and v * 1000 > above_ms}
