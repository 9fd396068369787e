"""The crawl process pins glibc's mmap threshold (RSS with multi-MB pages); the cleaner
keeps freed heap for the next page."""

import platform
import subprocess
import sys

import pytest

from stratacrawl.process.malloc import pin_mmap_threshold

pytestmark = pytest.mark.unit


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_takes_the_pinned_threshold() -> None:
    assert pin_mmap_threshold() is True
    assert pin_mmap_threshold() is True      # once per process (cached)
    assert pin_mmap_threshold.cache_info().hits >= 1


_CHURN = """
import resource, sys
if sys.argv[1] == "keep":
    from stratacrawl.process.malloc import keep_freed_heap
    assert keep_freed_heap() is True
def churn():  # what parsing a page does: a few MB of small blocks, all freed at the end
    x = [bytearray(1000) for _ in range(4000)]
    del x
churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    churn()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_heap_is_reused_without_faulting_it_in_again() -> None:
    def faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _CHURN, mode], check=True,
                             capture_output=True, text=True)
        return int(out.stdout)

    default, kept = faults("default"), faults("keep")
    assert default > 500          # ~1,000 pages back from the kernel: 20 x 4 MB trimmed
    assert kept < default / 10
