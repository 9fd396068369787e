"""The retry rules, as outcomes of fetch results."""

from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.fetch.classify import Kind, Verdict
from stratacrawl.fetch.result import FetchResult
from stratacrawl.fetch.worker import LEVEL2_DELAY, MAX_ATTEMPTS, outcome_for
from stratacrawl.frontier.tasks import ClaimedTask, TaskState
from stratacrawl.sources import Source

pytestmark = pytest.mark.unit
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SOURCE = Source(id="s", seeds=["http://x/"], cadence="30m")


def task(kind: str = "item", attempts: int = 1) -> ClaimedTask:
    return ClaimedTask(1, "s", "http://x/a", "h", kind, 5, attempts, 0, "w", NOW)


def result(kind: Kind, reason: str = "r", retry_after: float | None = None,
           status: int | None = 200) -> FetchResult:
    return FetchResult("http://x/a", Verdict(kind, reason, retry_after), NOW, "t", status=status)


def test_items_succeed_lists_recur_at_cadence() -> None:
    assert outcome_for(task(), result(Kind.OK), SOURCE, False, NOW)[1] == TaskState.SUCCEEDED
    _, state, _, _, due = outcome_for(task("list"), result(Kind.NOT_MODIFIED), SOURCE, False, NOW)
    assert state == TaskState.PENDING and due == NOW + timedelta(minutes=30)


def test_rate_limited_waits_retry_after() -> None:
    _, state, _, err, due = outcome_for(task(), result(Kind.RATE_LIMITED, "http-429", 42.0),
                                        SOURCE, False, NOW)
    assert (state, err, due) == (TaskState.RETRY_WAIT, "http-429", NOW + timedelta(seconds=42))


def test_transient_waits_then_fails_after_max_attempts() -> None:
    _, state, _, _, due = outcome_for(task(attempts=2), result(Kind.TRANSIENT), SOURCE, False, NOW)
    assert state == TaskState.RETRY_WAIT and due == NOW + timedelta(seconds=60)
    _, state, *_ = outcome_for(task(attempts=MAX_ATTEMPTS), result(Kind.TRANSIENT), SOURCE,
                               False, NOW)
    assert state == TaskState.FAILED


def test_level2_delays_a_failing_batch_15_minutes() -> None:
    _, state, _, _, due = outcome_for(task(), result(Kind.TRANSIENT), SOURCE, True, NOW)
    assert state == TaskState.RETRY_WAIT and due == NOW + LEVEL2_DELAY == NOW + timedelta(
        minutes=15)


def test_terminal_fails_at_once() -> None:
    _, state, status, err, due = outcome_for(task(), result(Kind.TERMINAL, "http-404", status=404),
                                             SOURCE, False, NOW)
    assert (state, status, err, due) == (TaskState.FAILED, 404, "http-404", None)
