"""The retry rules, as outcomes of fetch results."""

from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.cold.tasks import ClaimedTask, TaskState
from stratacrawl.fetch.classify import Kind, Verdict
from stratacrawl.fetch.outcomes import LEVEL2_DELAY, MAX_ATTEMPTS, outcome_for
from stratacrawl.fetch.result import FetchResult
from stratacrawl.sources import Source

pytestmark = pytest.mark.unit
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SOURCE = Source(id="s", seeds=["http://x/"], cadence="30m")


def task(kind: str = "item", attempts: int = 1, recrawl_s: float | None = None,
         content_hash: str | None = None) -> ClaimedTask:
    return ClaimedTask(1, "s", "http://x/a", "h", kind, 5, attempts, 0, "w", NOW, None,
                       recrawl_s, content_hash)


def result(kind: Kind, reason: str = "r", retry_after: float | None = None,
           status: int | None = 200) -> FetchResult:
    return FetchResult("http://x/a", Verdict(kind, reason, retry_after), NOW, "t", status=status)


def test_items_succeed_lists_recur_at_cadence_on_their_first_fetch() -> None:
    assert outcome_for(task(), result(Kind.OK), SOURCE, False, NOW).state == TaskState.SUCCEEDED
    o = outcome_for(task("list"), result(Kind.OK), SOURCE, False, NOW, "c1")
    assert (o.state, o.due_at, o.recrawl_s, o.changed) == (
        TaskState.PENDING, NOW + timedelta(minutes=30), 1800.0, None)


def test_a_list_that_did_not_change_waits_longer_and_one_that_changed_less() -> None:
    hour = task("list", recrawl_s=3600.0, content_hash="c1")
    same = outcome_for(hour, result(Kind.OK), SOURCE, False, NOW, "c1")
    assert (same.recrawl_s, same.changed) == (5400.0, False)
    assert same.due_at == NOW + timedelta(seconds=5400)
    unmodified = outcome_for(hour, result(Kind.NOT_MODIFIED, status=304), SOURCE, False, NOW)
    assert (unmodified.recrawl_s, unmodified.changed) == (5400.0, False)
    # a new list body waits for discovery to tell whether it brought new links
    new = outcome_for(hour, result(Kind.OK), SOURCE, False, NOW, "c2")
    assert (new.recrawl_s, new.changed, new.due_at) == (3600.0, None,
                                                         NOW + timedelta(hours=1))
    # never over max_interval (a day by default)
    assert outcome_for(task("list", recrawl_s=80_000.0, content_hash="c1"), result(Kind.OK),
                       SOURCE, False, NOW, "c1").recrawl_s == 86_400.0


def test_a_recurring_item_that_changed_comes_back_sooner_down_to_min_interval() -> None:
    prices = Source(id="s", seeds=["http://x/"], cadence="30m", recrawl={"items": True})
    new = outcome_for(task("item", recrawl_s=7200.0, content_hash="c1"), result(Kind.OK),
                      prices, False, NOW, "c2")
    assert (new.state, new.recrawl_s, new.changed) == (TaskState.PENDING, 3600.0, True)
    # a page changing on most fetches goes under the cadence: half of it by default
    assert outcome_for(task("item", recrawl_s=2000.0, content_hash="c1"), result(Kind.OK),
                       prices, False, NOW, "c2").recrawl_s == 1000.0
    assert outcome_for(task("item", recrawl_s=1000.0, content_hash="c1"), result(Kind.OK),
                       prices, False, NOW, "c2").recrawl_s == 900.0
    floor = Source(id="s", seeds=["http://x/"], cadence="30m",
                   recrawl={"items": True, "min_interval": "20m"})
    assert outcome_for(task("item", recrawl_s=2000.0, content_hash="c1"), result(Kind.OK),
                       floor, False, NOW, "c2").recrawl_s == 1200.0
    # the first fetch has nothing to compare: the cadence
    assert outcome_for(task("item", content_hash=None), result(Kind.OK), prices, False, NOW,
                       "c2").recrawl_s == 1800.0


def test_an_unknown_last_fingerprint_keeps_the_interval() -> None:
    o = outcome_for(task("list", recrawl_s=3600.0), result(Kind.OK), SOURCE, False, NOW, "c1")
    assert (o.recrawl_s, o.changed) == (3600.0, None)


def test_a_fixed_cadence_source_and_recurring_items() -> None:
    fixed = Source(id="s", seeds=["http://x/"], cadence="30m", recrawl={"adaptive": False})
    o = outcome_for(task("list", recrawl_s=7200.0, content_hash="c1"), result(Kind.OK), fixed,
                    False, NOW, "c1")
    assert (o.recrawl_s, o.changed, o.due_at) == (1800.0, False, NOW + timedelta(minutes=30))
    prices = Source(id="s", seeds=["http://x/"], cadence="10m",
                    recrawl={"items": True, "max_interval": "2h"})
    o = outcome_for(task("item", recrawl_s=6000.0, content_hash="c1"), result(Kind.OK), prices,
                    False, NOW, "c1")
    assert (o.state, o.recrawl_s) == (TaskState.PENDING, 7200.0)


def test_rate_limited_waits_retry_after() -> None:
    _, state, _, err, due, *_ = outcome_for(task(), result(Kind.RATE_LIMITED, "http-429", 42.0),
                                            SOURCE, False, NOW)
    assert (state, err, due) == (TaskState.RETRY_WAIT, "http-429", NOW + timedelta(seconds=42))


def test_transient_waits_then_fails_after_max_attempts() -> None:
    _, state, _, _, due, *_ = outcome_for(task(attempts=2), result(Kind.TRANSIENT), SOURCE, False,
                                          NOW)
    assert state == TaskState.RETRY_WAIT and due == NOW + timedelta(seconds=60)
    _, state, *_ = outcome_for(task(attempts=MAX_ATTEMPTS), result(Kind.TRANSIENT), SOURCE,
                               False, NOW)
    assert state == TaskState.FAILED


def test_level2_delays_a_failing_batch_15_minutes() -> None:
    _, state, _, _, due, *_ = outcome_for(task(), result(Kind.TRANSIENT), SOURCE, True, NOW)
    assert state == TaskState.RETRY_WAIT and due == NOW + LEVEL2_DELAY == NOW + timedelta(
        minutes=15)


def test_terminal_fails_at_once() -> None:
    _, state, status, err, due, *_ = outcome_for(task(), result(Kind.TERMINAL, "http-404",
                                                                status=404), SOURCE, False, NOW)
    assert (state, status, err, due) == (TaskState.FAILED, 404, "http-404", None)
