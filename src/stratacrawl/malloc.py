"""glibc's allocator in a crawl process: large pages are served by mmap, always.

glibc raises its mmap threshold to the size of each mmapped block it frees (up to 32 MB).
After the first 5 MB page a crawler has freed, every later 1-5 MB body came from the heap
instead, and the heap kept the holes: a crawl worker's RSS climbed by ~140 MB over
100 k pages with 1 % of pages in 1-5 MB (505 MB vs 367 MB with the threshold pinned).
Pinning ``M_MMAP_THRESHOLD`` turns that adjustment off; blocks above it go back to the
kernel when freed. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

log = logging.getLogger(__name__)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 256 * 1024


@functools.cache
def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Once per process; True when glibc took it."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to pin
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    ok = bool(mallopt(M_MMAP_THRESHOLD, threshold))
    if not ok:
        log.warning("malloc: mallopt(M_MMAP_THRESHOLD) refused")
    return ok
