"""Long-running processes collect young objects rarely and never scan start-up's heap."""

import gc

import pytest

from stratacrawl.gctune import YOUNG_THRESHOLD, tune_gc

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
