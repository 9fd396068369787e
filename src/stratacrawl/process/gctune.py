"""CPython's cyclic garbage collector in the long-running processes: crawl workers, the
cleaner, the site simulator.

With the defaults (a young collection every 700 net allocations) a busy crawl worker
ran ~16 young collections a second. A batch's objects live as long as the batch (ten
requests of ~1.8 s each in the load test), so they outlived two collections, reached
the oldest generation, and made it "due" again and again: a full collection every ~8 s,
each pausing the event loop for 0.3-0.9 s — the longest stalls a worker had, and
what bunched a source's requests into rate violations. Young collections every
``YOUNG_THRESHOLD`` allocations promote ~70 times fewer short-lived objects; what
start-up built (modules, settings, clients) is frozen out of every collection.
Reference counting frees all acyclic garbage at once either way; only cycles wait.
"""

from __future__ import annotations

import functools
import gc
import logging
import time

log = logging.getLogger(__name__)
YOUNG_THRESHOLD = 50_000


@functools.cache
def tune_gc(young: int = YOUNG_THRESHOLD) -> tuple[int, int, int]:
    """Once per process, after start-up; returns the thresholds now in force."""
    gc.freeze()  # start-up's objects: never garbage, never scanned again
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
    log.debug("gc: %d start-up objects frozen, young threshold %d", gc.get_freeze_count(),
              young)
    return gc.get_threshold()


class GcPauses:
    """Time spent in each generation's collections (``gc.callbacks``), for a process to
    report beside its loop lag: a full collection stops the event loop for its length."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.total_s = [0.0, 0.0, 0.0]
        self.max_s = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        gen, took = info["generation"], time.perf_counter() - self._started
        self.count[gen] += 1
        self.total_s[gen] += took
        self.max_s[gen] = max(self.max_s[gen], took)

    def install(self) -> GcPauses:
        if self not in gc.callbacks:
            gc.callbacks.append(self)
        return self

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def to_json(self) -> dict[str, list[float]]:
        return {"count": list(self.count),
                "total_ms": [round(t * 1000, 1) for t in self.total_s],
                "max_ms": [round(t * 1000, 1) for t in self.max_s]}
