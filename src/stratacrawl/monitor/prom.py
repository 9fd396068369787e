"""The seven families in the Prometheus text format (prometheus-client), from a snapshot
taken at scrape time; ``stratacrawl metrics serve`` exposes it on ``/metrics``."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from stratacrawl.monitor.families import SETTLE_S, WINDOW_MIN, SourceMetrics

FAMILIES = (
    "stratacrawl_scheduling_lag_seconds", "stratacrawl_fetch_success_ratio",
    "stratacrawl_response_time_seconds", "stratacrawl_queue_backlog",
    "stratacrawl_ingest_per_minute", "stratacrawl_retry_ratio",
    "stratacrawl_task_completion_seconds",
)


def _none(v: float | None) -> float:
    return float("nan") if v is None else float(v)


class SnapshotCollector(Collector):
    """Yields the families of the latest snapshot (set before each exposition)."""

    def __init__(self) -> None:
        self.snapshot: dict[str, SourceMetrics] = {}
        # per source: (configured rate, effective rate, seconds still held by Retry-After)
        self.rates: dict[str, tuple[float, float, float]] = {}

    def collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily(FAMILIES[0], "Age of the oldest due, unclaimed task",
                                labels=["source"])
        due = GaugeMetricFamily("stratacrawl_due_tasks", "Tasks due and not claimed",
                                labels=["source"])
        success = GaugeMetricFamily(FAMILIES[1], "Successful fetches / requests, 5 minutes",
                                    labels=["source"])
        latency = GaugeMetricFamily(FAMILIES[2], "Response time, 5 minutes and baseline hour",
                                    labels=["source", "stat"])
        backlog = GaugeMetricFamily(FAMILIES[3], "Ready tasks", labels=["source", "where"])
        ingest = GaugeMetricFamily(FAMILIES[4], "Pages fetched and rows staged per minute "
                                   f"(the {WINDOW_MIN} whole minutes that ended at least "
                                   f"{SETTLE_S} s ago), records committed ({WINDOW_MIN} minutes)",
                                   labels=["source", "stage"])
        retry = GaugeMetricFamily(FAMILIES[5], "Level-1 retries per request, 5 minutes",
                                  labels=["source"])
        done = GaugeMetricFamily(FAMILIES[6], "Task created → record committed, last hour",
                                 labels=["source", "quantile"])
        # what the alert rules also need (stratacrawl alert-rules --format prometheus)
        requests = GaugeMetricFamily("stratacrawl_requests", "Requests, 5 minutes, the "
                                     "baseline hour and the settled 5 minutes of ingest",
                                     labels=["source", "window"])
        silent = GaugeMetricFamily("stratacrawl_last_success_age_seconds",
                                   "Seconds since the newest successful fetch (+Inf: none)",
                                   labels=["source"])
        quiet = GaugeMetricFamily("stratacrawl_last_request_age_seconds",
                                  "Seconds since the newest request, any outcome (+Inf: none)",
                                  labels=["source"])
        now = time.time()
        for sid, m in sorted(self.snapshot.items()):
            quiet.add_metric([sid], now - m.last_request_at if m.last_request_at
                             else float("inf"))
            requests.add_metric([sid, "5m"], m.window.requests)
            requests.add_metric([sid, "baseline"], m.baseline.requests)
            requests.add_metric([sid, "settled"], m.settled.requests)
            silent.add_metric([sid], now - m.last_success_at if m.last_success_at
                              else float("inf"))
            lag.add_metric([sid], m.lag_s)
            due.add_metric([sid], m.due_tasks)
            success.add_metric([sid], _none(m.window.success_rate))
            w, b = m.window, m.baseline
            latency.add_metric([sid, "mean"], _none(w.mean_ms and w.mean_ms / 1000))
            p99 = w.quantile_ms(0.99)
            latency.add_metric([sid, "p99"], _none(p99 and p99 / 1000))
            latency.add_metric([sid, "baseline_mean"], _none(b.mean_ms and b.mean_ms / 1000))
            backlog.add_metric([sid, "hot"], m.hot_backlog)
            backlog.add_metric([sid, "ledger"], m.ledger_backlog)
            ingest.add_metric([sid, "fetched"], m.fetched_per_min)
            ingest.add_metric([sid, "ok"], m.ok_per_min)
            ingest.add_metric([sid, "staged"], m.staged_per_min)
            ingest.add_metric([sid, "records"], m.records_per_min)
            retry.add_metric([sid], _none(w.retry_ratio))
            done.add_metric([sid, "0.5"], _none(m.completion_p50_s))
            done.add_metric([sid, "0.99"], _none(m.completion_p99_s))
        rate = GaugeMetricFamily("stratacrawl_rate_per_second", "Requests/s a source may get: "
                                 "configured, and effective (lowered by 429s)",
                                 labels=["source", "kind"])
        held = GaugeMetricFamily("stratacrawl_source_held_seconds",
                                 "Seconds a Retry-After still holds the source", labels=["source"])
        for sid, (configured, effective, hold) in sorted(self.rates.items()):
            rate.add_metric([sid, "configured"], configured)
            rate.add_metric([sid, "effective"], effective)
            held.add_metric([sid], hold)
        yield from (lag, due, success, latency, backlog, ingest, retry, done, requests, silent, quiet,
                    rate, held)


def registry() -> tuple[CollectorRegistry, SnapshotCollector]:
    reg = CollectorRegistry()
    collector = SnapshotCollector()
    reg.register(collector)
    return reg, collector
