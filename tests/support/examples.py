"""How many Hypothesis examples a property test draws.

The whole suite (CI) draws the full number; the fast loop (``pytest -m "not slow"``)
draws an eighth of it, at least 100 — still more than Hypothesis' default — so an
iteration is quick and the full search still runs on every CI build.
"""

from __future__ import annotations

FAST = False   # set by tests/conftest.py's pytest_configure from the marker expression


def examples(full: int) -> int:
    return full if not FAST else max(100, full // 8)
