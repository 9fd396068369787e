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
