"""Long-running processes collect young objects rarely and never scan start-up's heap."""

import gc

import pytest

from stratacrawl.process.gctune import YOUNG_THRESHOLD, GcPauses, tune_gc

pytestmark = pytest.mark.unit


def test_tuned_once_young_threshold_raised_start_up_frozen() -> None:
    saved = gc.get_threshold()  # a crawl earlier in this process may have tuned it already
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    tune_gc.cache_clear()
    try:
        assert tune_gc() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        assert gc.get_freeze_count() > 0
        gc.set_threshold(700, 10, 10)
        assert tune_gc() == (YOUNG_THRESHOLD, 10, 10)  # once per process: cached, not redone
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*saved)
        gc.unfreeze()
        tune_gc.cache_clear()


def test_gc_pauses_time_each_generation() -> None:
    pauses = GcPauses().install()
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        pauses.uninstall()
    assert pauses.count[2] >= 1 and pauses.count[0] >= 1
    assert pauses.max_s[2] > 0 and pauses.total_s[2] >= pauses.max_s[2]
    assert pauses not in gc.callbacks
    before = list(pauses.count)
    gc.collect(2)  # no longer counted
    assert pauses.to_json()["count"] == before
