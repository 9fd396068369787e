"""Alert rules and live windows: pure functions."""

from __future__ import annotations

import pytest

from stratacrawl.hot.live import Window
from stratacrawl.monitor.families import SourceMetrics
from stratacrawl.monitor.rules import findings
from stratacrawl.sources import AlertThresholds

pytestmark = pytest.mark.unit
NOW = 1_800_000_000.0
T = AlertThresholds()


def metrics(requests: int = 100, ok: int = 100, retries: int = 0, mean_ms: float = 200,
            base_ms: float = 200, staged: float | None = None, due: int = 0, lag: float = 0,
            last_ok: float | None = NOW - 10, last_request: float | None = NOW - 10,
            settled: bool = True) -> SourceMetrics:
    w = Window(requests=requests, ok=ok, failed=requests - ok, retries=retries,
               latency_ms_sum=mean_ms * requests, histogram={"le250": requests})
    b = Window(requests=600, ok=600, latency_ms_sum=base_ms * 600)
    # ``settled``: the ingest minutes hold the same requests (False: a crawl's first
    # minute, none of its minutes settled yet, nothing staged)
    return SourceMetrics("s", due_tasks=due, lag_s=lag, window=w, baseline=b,
                         settled=w if settled else Window(),
                         staged_per_min=(ok / 5 if settled else 0) if staged is None
                         else staged,
                         last_success_at=last_ok, last_request_at=last_request)


def rules(m: SourceMetrics, history: list[tuple[float, int]] | None = None) -> set[tuple[str, str]]:
    return {(f.rule, f.level) for f in findings(m, T, NOW, history or [])}


def test_a_healthy_source_raises_nothing() -> None:
    assert rules(metrics()) == set()


@pytest.mark.parametrize(("ok", "want"), [(99, set()), (95, {("success_rate", "P2")}),
                                          (50, {("success_rate", "P1")})])
def test_success_rate_levels(ok: int, want: set[tuple[str, str]]) -> None:
    assert {r for r in rules(metrics(ok=ok)) if r[0] == "success_rate"} == want


def test_too_few_requests_decide_nothing() -> None:
    assert rules(metrics(requests=5, ok=0)) == set()


def test_latency_attention_and_intervention() -> None:
    assert ("latency", "P2") in rules(metrics(mean_ms=280))
    assert ("latency", "P1") in rules(metrics(mean_ms=450))
    assert not any(r[0] == "latency" for r in rules(metrics(mean_ms=240)))


def test_retries_ingest_and_stop() -> None:
    assert ("retry_ratio", "P2") in rules(metrics(retries=8))
    assert ("ingest_lag", "P1") in rules(metrics(staged=5))
    # a crawl's first minute: fetched pages, none staged yet, no minute settled
    assert rules(metrics(settled=False)) == set()
    stopped = metrics(requests=0, ok=0, due=40, lag=3600, last_ok=NOW - 3600)
    assert rules(stopped) == {("fetch_stopped", "P0")}
    assert rules(metrics(requests=0, ok=0, due=40, lag=60)) == set()  # just due: not stopped


def test_work_due_and_nothing_requested_is_a_stall() -> None:
    """Not fetching at all while work waits (runs cancelled or crashed, no worker) is its
    own P1, before the P0 "no success for 15 minutes" — and only while work is due."""
    stalled = metrics(requests=0, ok=0, due=40, lag=300, last_ok=NOW - 300,
                      last_request=NOW - 300)
    assert rules(stalled) == {("not_fetching", "P1")}
    never = metrics(requests=0, ok=0, due=3, lag=200, last_ok=None, last_request=None)
    assert rules(never) == {("not_fetching", "P1")}
    found = findings(stalled, T, NOW)[0]
    assert found.message.startswith("s: stalled — not fetching: 40 tasks due (oldest 5 min)")
    assert rules(metrics(requests=0, ok=0, due=40, lag=300, last_request=NOW - 60)) == set()
    assert rules(metrics(requests=0, ok=0, due=0, lag=0, last_request=NOW - 3600)) == set()
    assert rules(metrics(requests=0, ok=0, due=40, lag=100, last_request=NOW - 3600)) == set()
    both = metrics(requests=0, ok=0, due=40, lag=3600, last_ok=NOW - 3600,
                   last_request=NOW - 3600)
    assert rules(both) == {("fetch_stopped", "P0"), ("not_fetching", "P1")}


def test_backlog_growing_needs_a_steady_rise() -> None:
    rising = [(NOW - 600, 1000), (NOW - 300, 1150), (NOW, 1300)]
    assert ("backlog_growing", "P3") in rules(metrics(), rising)
    bumpy = [(NOW - 600, 1000), (NOW - 300, 1400), (NOW, 1300)]
    assert ("backlog_growing", "P3") not in rules(metrics(), bumpy)
    first_discovery = [(NOW - 20, 1), (NOW - 10, 150), (NOW, 329)]  # seconds, not minutes
    assert ("backlog_growing", "P3") not in rules(metrics(), first_discovery)


def test_window_quantile_from_the_histogram() -> None:
    w = Window(requests=100, histogram={"le100": 90, "le1000": 9, "le5000": 1})
    assert w.quantile_ms(0.5) == 100 and w.quantile_ms(0.99) == 1000
    assert w.quantile_ms(1.0) == 5000 and Window().quantile_ms(0.99) is None
