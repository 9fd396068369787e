"""The retry policy of every flow's tasks, in one place.

Transient failures — a connection refused, reset or timed out (PostgreSQL, Redis,
Elasticsearch), a PostgreSQL serialization failure or deadlock, Elasticsearch answering
429/502/503/504, a pool with no free connection — are retried (``TRANSIENT``: 3 retries,
about 5 s apart, jittered). Configuration errors and bad
input (``stratacrawl.errors.Terminal``, an unknown source, a bad parameter) fail at
once with their message: trying again would fail the same way.
"""

from __future__ import annotations

from typing import Any

from stratacrawl.tier_errors import is_transient

__all__ = ["TRANSIENT", "is_transient", "retry_if_transient"]


def retry_if_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's ``retry_condition_fn``: retry a failed task run only for a transient error."""
    exc = state.data if isinstance(state.data, BaseException) else None
    return exc is not None and is_transient(exc)


RETRY_DELAY_S = 5

TRANSIENT: dict[str, Any] = {
    "retries": 3,
    # One delay, not a growing list: the Prefect UI shows a list of delays as "NaNs".
    "retry_delay_seconds": RETRY_DELAY_S,
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": retry_if_transient,
}
