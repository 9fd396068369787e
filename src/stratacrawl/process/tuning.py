"""Process-wide tuning for long-running processes, called by entry points only (the CLI
commands, the flows, the benchmarks), never by library code: a test or an embedding
application that calls the core must not have its garbage collector or allocator
retuned behind its back. The reasons are in :mod:`stratacrawl.process.gctune` and
:mod:`stratacrawl.process.malloc`."""

from __future__ import annotations

from stratacrawl.process.gctune import tune_gc
from stratacrawl.process.malloc import keep_freed_heap, pin_mmap_threshold


def tune_crawl_process() -> None:
    """A crawl worker: large pages from mmap, no full collections pausing the loop."""
    pin_mmap_threshold()
    tune_gc()


def tune_long_running() -> None:
    """The cleaner and the site simulator: no full collections pausing the loop, and a
    page's freed DOM kept for the next page's."""
    keep_freed_heap()
    tune_gc()
