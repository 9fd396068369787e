"""Alert rules: pure functions from a source's metrics to findings with a level.

Levels: P0 data stopped, P1 part of the pipeline failing, P2 degradation,
P3 risk. Thresholds come from the source (``alerts:`` in sources.yaml); holding and
firing are the evaluator's job.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from stratacrawl.monitor.families import WINDOW_MIN, SourceMetrics
from stratacrawl.sources import AlertThresholds, parse_duration

BACKLOG_MIN_SPAN_S = 300.0  # the backlog rule judges a rise over at least this long

LEVEL_SEVERITY = {"P0": "critical", "P1": "critical", "P2": "warning", "P3": "info"}


@dataclass(frozen=True)
class Finding:
    rule: str
    level: str
    message: str
    value: float


def stalled(m: SourceMetrics, t: AlertThresholds, now: float) -> bool:
    """Work is due and has waited, and nothing of the source was requested for
    ``stalled_after`` (two fetch schedule intervals by default): no fetch is running for
    it — runs cancelled, crashed or not scheduled, no worker — whatever the reason."""
    after = parse_duration(t.stalled_after).total_seconds()
    quiet_s = now - m.last_request_at if m.last_request_at else float("inf")
    return m.due_tasks > 0 and m.lag_s > after and quiet_s > after


def findings(m: SourceMetrics, t: AlertThresholds, now: float,
             backlog_history: Sequence[tuple[float, int]] = ()) -> list[Finding]:
    out: list[Finding] = []
    sid, w, b = m.source_id, m.window, m.baseline
    stopped = parse_duration(t.stopped_after).total_seconds()
    silent_s = now - m.last_success_at if m.last_success_at else float("inf")
    if m.due_tasks > 0 and m.lag_s > stopped and silent_s > stopped:
        out.append(Finding("fetch_stopped", "P0",
                           f"{sid}: no successful fetch for {min(silent_s, 1e9) / 60:.0f} min "
                           f"while {m.due_tasks} tasks are due (oldest {m.lag_s / 60:.0f} min)",
                           m.lag_s))
    if stalled(m, t, now):
        quiet_s = now - m.last_request_at if m.last_request_at else None
        out.append(Finding("not_fetching", "P1",
                           f"{sid}: stalled — not fetching: {m.due_tasks} tasks due (oldest "
                           f"{m.lag_s / 60:.0f} min) and "
                           + (f"no request for {quiet_s / 60:.0f} min" if quiet_s is not None
                              else "no request recorded")
                           + "; are fetch runs running? (Prefect UI: fetch runs Cancelled, "
                           "Crashed or none; a worker on the pool)", m.lag_s))
    if w.requests >= t.min_requests and w.success_rate is not None:
        rate = w.success_rate
        if rate < t.success_severe:
            out.append(Finding("success_rate", "P1", f"{sid}: fetch success {rate:.1%} "
                               f"< {t.success_severe:.0%} over {WINDOW_MIN} min", rate))
        elif rate < t.success_alert:
            out.append(Finding("success_rate", "P2", f"{sid}: fetch success {rate:.1%} "
                               f"< {t.success_alert:.0%} over {WINDOW_MIN} min", rate))
        if w.retry_ratio is not None and w.retry_ratio > t.retry_ratio:
            out.append(Finding("retry_ratio", "P2", f"{sid}: {w.retry_ratio:.1%} of requests "
                               f"retried (> {t.retry_ratio:.0%})", w.retry_ratio))
    if m.settled.requests >= t.min_requests and \
            m.staged_per_min < t.ingest_ratio * m.ok_per_min:
        out.append(Finding("ingest_lag", "P1",
                           f"{sid}: staging takes {m.staged_per_min:.0f} pages/min for "
                           f"{m.ok_per_min:.0f} fetched: ingest diverges from fetch",
                           m.staged_per_min))
    if (w.requests >= t.min_requests and b.requests >= t.min_requests and w.mean_ms
            and b.mean_ms):
        ratio = w.mean_ms / b.mean_ms
        if ratio >= t.latency_intervene:
            out.append(Finding("latency", "P1", f"{sid}: mean response {w.mean_ms:.0f} ms, "
                               f"{ratio:.1f}x the hour before", ratio))
        elif ratio >= t.latency_attention:
            out.append(Finding("latency", "P2", f"{sid}: mean response {w.mean_ms:.0f} ms, "
                               f"{ratio:.1f}x the hour before", ratio))
    span = backlog_history[-1][0] - backlog_history[0][0] if backlog_history else 0.0
    # A rise needs minutes to mean anything: a crawl's first discovery fills the backlog
    # within seconds, and that is work arriving, not work piling up.
    if len(backlog_history) >= 3 and span >= BACKLOG_MIN_SPAN_S:
        values = [v for _, v in backlog_history]
        growing = all(b2 >= b1 for b1, b2 in itertools.pairwise(values))
        if growing and values[0] > 0 and values[-1] >= values[0] * (1 + t.backlog_growth) \
                and values[-1] >= 100:
            out.append(Finding("backlog_growing", "P3",
                               f"{sid}: backlog {values[0]} → {values[-1]} in "
                               f"{(backlog_history[-1][0] - backlog_history[0][0]) / 60:.0f} min",
                               float(values[-1])))
    return out


# The same rules in PromQL, over the gauges of ``/metrics`` (``monitor/prom.py``), for
# teams that alert with Prometheus (``stratacrawl alert-rules --format prometheus``).
# ``{sel}`` is the source's label selector; the other names are the source's thresholds
# (``stopped_s``, ``stalled_s``: ``stopped_after``, ``stalled_after`` in seconds). One
# entry per (rule, level) the evaluator above can find — a test holds the two together. The backlog rule is
# approximated as a rise of ``backlog_growth`` over 15 minutes (the evaluator also wants
# every step non-decreasing).
_REQ = 'stratacrawl_requests{{{sel},window="5m"}}'
PROMQL: dict[tuple[str, str], str] = {
    ("fetch_stopped", "P0"):
        "stratacrawl_due_tasks{{{sel}}} > 0 and on(source) "
        "stratacrawl_scheduling_lag_seconds{{{sel}}} > {stopped_s} and on(source) "
        "stratacrawl_last_success_age_seconds{{{sel}}} > {stopped_s}",
    ("not_fetching", "P1"):
        "stratacrawl_due_tasks{{{sel}}} > 0 and on(source) "
        "stratacrawl_scheduling_lag_seconds{{{sel}}} > {stalled_s} and on(source) "
        "stratacrawl_last_request_age_seconds{{{sel}}} > {stalled_s}",
    ("success_rate", "P1"):
        "stratacrawl_fetch_success_ratio{{{sel}}} < {success_severe} and on(source) "
        + _REQ + " >= {min_requests}",
    ("success_rate", "P2"):
        "stratacrawl_fetch_success_ratio{{{sel}}} < {success_alert} and "
        "stratacrawl_fetch_success_ratio{{{sel}}} >= {success_severe} and on(source) "
        + _REQ + " >= {min_requests}",
    ("retry_ratio", "P2"):
        "stratacrawl_retry_ratio{{{sel}}} > {retry_ratio} and on(source) "
        + _REQ + " >= {min_requests}",
    ("ingest_lag", "P1"):
        'stratacrawl_ingest_per_minute{{{sel},stage="staged"}} < ignoring(stage) '
        '{ingest_ratio} * stratacrawl_ingest_per_minute{{{sel},stage="ok"}} and on(source) '
        'stratacrawl_requests{{{sel},window="settled"}} >= {min_requests}',
    ("latency", "P1"):
        'stratacrawl_response_time_seconds{{{sel},stat="mean"}} / ignoring(stat) '
        'stratacrawl_response_time_seconds{{{sel},stat="baseline_mean"}} >= {latency_intervene}'
        " and on(source) " + _REQ + " >= {min_requests} and on(source) "
        'stratacrawl_requests{{{sel},window="baseline"}} >= {min_requests}',
    ("latency", "P2"):
        '(stratacrawl_response_time_seconds{{{sel},stat="mean"}} / ignoring(stat) '
        'stratacrawl_response_time_seconds{{{sel},stat="baseline_mean"}}) >= '
        "{latency_attention} < {latency_intervene} and on(source) " + _REQ
        + " >= {min_requests} and on(source) "
        'stratacrawl_requests{{{sel},window="baseline"}} >= {min_requests}',
    ("backlog_growing", "P3"):
        'stratacrawl_queue_backlog{{{sel},where="ledger"}} >= 100 and '
        'stratacrawl_queue_backlog{{{sel},where="ledger"}} >= (1 + {backlog_growth}) * '
        '(stratacrawl_queue_backlog{{{sel},where="ledger"}} offset 15m) and '
        '(stratacrawl_queue_backlog{{{sel},where="ledger"}} offset 15m) > 0',
}


def promql(rule: str, level: str, source_id: str, t: AlertThresholds) -> str:
    """The PromQL of ``(rule, level)`` for one source and its thresholds."""
    values = t.model_dump()
    values["stopped_s"] = parse_duration(t.stopped_after).total_seconds()
    values["stalled_s"] = parse_duration(t.stalled_after).total_seconds()
    escaped = source_id.replace("\\", "\\\\").replace('"', '\\"')
    return PROMQL[(rule, level)].format(sel=f'source="{escaped}"', **values)
