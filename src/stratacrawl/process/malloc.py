"""glibc's allocator in the long-running processes. Elsewhere than glibc this does nothing.

**Large pages are served by mmap, always** (crawl workers). glibc raises its mmap
threshold to the size of each mmapped block it frees (up to 32 MB). After the first 5 MB
page a crawler has freed, every later 1-5 MB body came from the heap instead, and the
heap kept the holes: a crawl worker's RSS climbed by ~140 MB over 100 k pages with 1 % of
pages in 1-5 MB (505 MB vs 367 MB with the threshold pinned). Pinning
``M_MMAP_THRESHOLD`` turns that adjustment off; blocks above it go back to the kernel
when freed.

**Freed heap is kept for the next page** (the cleaner). Parsing a page builds its DOM in
a few MB of small blocks and frees them all at the end; with glibc's default trim
threshold (128 KB) the top of the heap went back to the kernel after every page and the
next page faulted it in again: 26 page faults and ~70 µs of system time a page, ~15 % of
a rules page's cleaning (measured on 48 KB product pages: 3 faults and ~12 µs with
``M_TRIM_THRESHOLD`` at 64 MB). The cost is that much freed memory held at most.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 256 * 1024
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024


def _mallopt(param: int, value: int, name: str) -> bool:
    """glibc's ``mallopt(param, value)``; True when it took it (False: not glibc)."""
    libname = ctypes.util.find_library("c")
    if not libname:
        return False
    try:
        mallopt = ctypes.CDLL(libname).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(mallopt(param, value))
    if not ok:
        log.warning("malloc: mallopt(%s) refused", name)
    return ok


@functools.cache
def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Once per process; True when glibc took it."""
    return _mallopt(M_MMAP_THRESHOLD, threshold, "M_MMAP_THRESHOLD")


@functools.cache
def keep_freed_heap(threshold: int = TRIM_THRESHOLD_BYTES) -> bool:
    """Once per process: up to ``threshold`` bytes of freed heap stay mapped for reuse;
    True when glibc took it."""
    return _mallopt(M_TRIM_THRESHOLD, threshold, "M_TRIM_THRESHOLD")
