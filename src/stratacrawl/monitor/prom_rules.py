"""The alert rules as a Prometheus rules file: one alert per source and (rule, level),
its thresholds from ``sources.yaml``, the same hold as the built-in evaluator
(``STRATACRAWL_ALERT_HOLD_S``, 3 minutes) as ``for:``. ``stratacrawl alert-rules
--format prometheus`` writes it; load it in Prometheus beside a scrape of
``stratacrawl metrics serve``'s ``/metrics``."""

from __future__ import annotations

from typing import Any

from stratacrawl.monitor.rules import LEVEL_SEVERITY, PROMQL, promql
from stratacrawl.sources import SourcesFile

GROUP = "stratacrawl"
DESCRIPTIONS = {
    "fetch_stopped": "No successful fetch for longer than stopped_after while tasks are due.",
    "not_fetching": "No request at all for longer than stalled_after while tasks are due "
                    "(stalled: fetch runs cancelled, crashed or not running).",
    "success_rate": "Fetch success over 5 minutes below the source's threshold.",
    "retry_ratio": "Too many level-1 retries per request over 5 minutes.",
    "ingest_lag": "Staging takes fewer pages than are fetched: ingest diverges from fetch.",
    "latency": "Mean response time over 5 minutes against the hour before.",
    "backlog_growing": "The ledger backlog rose steadily over 15 minutes.",
}


def _alert_name(rule: str, level: str) -> str:
    return "Stratacrawl" + "".join(p.title() for p in rule.split("_")) + level


def rules_document(sources: SourcesFile, hold_s: float) -> dict[str, Any]:
    """The rules file as a document (``yaml.safe_dump`` it)."""
    rules = []
    for source in sources.sources:
        for (rule, level) in PROMQL:
            rules.append({
                "alert": _alert_name(rule, level),
                "expr": promql(rule, level, source.id, source.alerts),
                "for": f"{int(hold_s)}s",
                "labels": {"source": source.id, "rule": rule, "level": level,
                           "severity": LEVEL_SEVERITY[level]},
                "annotations": {
                    "summary": f"{level} {rule} on {source.id}",
                    "description": DESCRIPTIONS[rule],
                },
            })
    return {"groups": [{"name": GROUP, "rules": rules}]}
