"""The crawl process pins glibc's mmap threshold (RSS with multi-MB pages)."""

import platform

import pytest

from stratacrawl.malloc import pin_mmap_threshold

pytestmark = pytest.mark.unit


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_glibc_takes_the_pinned_threshold() -> None:
    assert pin_mmap_threshold() is True
    assert pin_mmap_threshold() is True      # once per process (cached)
    assert pin_mmap_threshold.cache_info().hits >= 1
