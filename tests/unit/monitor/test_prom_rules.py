"""The alert rules as a Prometheus rules file: valid for promtool, and firing in
Prometheus exactly when the built-in evaluator finds the same (rule, level)."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stratacrawl.hot.live import Window
from stratacrawl.monitor.families import SourceMetrics
from stratacrawl.monitor.prom import registry
from stratacrawl.monitor.prom_rules import _alert_name, rules_document
from stratacrawl.monitor.rules import PROMQL, findings
from stratacrawl.sources import AlertThresholds, parse_sources

pytestmark = pytest.mark.unit
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)")
T = AlertThresholds()
HOLD_S = 180


def metrics(requests: int = 100, ok: int = 100, retries: int = 0, mean_ms: float = 200,
            base_ms: float = 200, staged: float | None = None, due: int = 0, lag: float = 0,
            silent_s: float | None = 10, quiet_s: float | None = 10,
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
                         last_success_at=None if silent_s is None else time.time() - silent_s,
                         last_request_at=None if quiet_s is None else time.time() - quiet_s)


SCENARIOS = {
    "healthy": metrics(),
    "success P2": metrics(ok=95),
    "success P1": metrics(ok=80),
    "too few requests": metrics(requests=10, ok=0),
    "retries": metrics(retries=8),
    "ingest lag": metrics(staged=5),
    "first minute of a crawl": metrics(settled=False),
    "latency P2": metrics(mean_ms=300),
    "latency P1": metrics(mean_ms=500),
    "stopped": metrics(requests=0, ok=0, due=40, lag=3600, silent_s=3600, quiet_s=3600),
    "never succeeded": metrics(requests=0, ok=0, due=40, lag=3600, silent_s=None),
    "failing, still fetching": metrics(requests=0, ok=0, due=40, lag=3600, silent_s=3600),
    "stalled": metrics(requests=0, ok=0, due=40, lag=300, silent_s=300, quiet_s=300),
    "nothing ever requested": metrics(requests=0, ok=0, due=40, lag=300, silent_s=None,
                                      quiet_s=None),
    "just due": metrics(requests=0, ok=0, due=40, lag=60, quiet_s=300),
}
SOURCES = parse_sources({"sources": [{"id": "s", "seeds": ["https://s.example/"]}]})


def test_every_rule_the_evaluator_can_find_has_its_promql() -> None:
    found = {(f.rule, f.level) for m in SCENARIOS.values()
             for f in findings(m, T, time.time())}
    found |= {(f.rule, f.level) for f in findings(
        metrics(), T, time.time(), [(0.0, 100), (200.0, 150), (400.0, 200)])}
    assert found <= set(PROMQL), found - set(PROMQL)
    assert found >= set(PROMQL) - {("backlog_growing", "P3")}  # no dead PromQL entries


def _series(m: SourceMetrics) -> list[dict[str, str]]:
    """The exposition of ``/metrics`` for ``m``, as constant promtool input series."""
    reg, collector = registry()
    collector.snapshot = {m.source_id: m}
    out = []
    for family in text_string_to_metric_families(generate_latest(reg).decode()):
        for sample in family.samples:
            if sample.value != sample.value:  # NaN: Prometheus compares it false; leave out
                continue
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            value = "1e12" if sample.value == float("inf") else repr(float(sample.value))
            out.append({"series": f"{sample.name}{{{labels}}}", "values": f"{value}x20"})
    return out


@needs_promtool
def test_promtool_accepts_the_rules_and_they_fire_as_the_evaluator_does(
        tmp_path: Path) -> None:
    doc = rules_document(SOURCES, HOLD_S)
    rules_file = tmp_path / "stratacrawl.rules.yml"
    rules_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    checked = subprocess.run([PROMTOOL, "check", "rules", str(rules_file)],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(PROMQL)} rules found" in checked.stdout

    by_name = {r["alert"]: r for r in doc["groups"][0]["rules"]}
    tests = []
    for name, m in SCENARIOS.items():
        want = {(f.rule, f.level) for f in findings(m, T, time.time())}
        cases = []
        for (rule, level), alert in ((k, _alert_name(*k)) for k in PROMQL):
            exp = [{"exp_labels": by_name[alert]["labels"],
                    "exp_annotations": by_name[alert]["annotations"]}] \
                if (rule, level) in want else []
            cases.append({"eval_time": "10m", "alertname": alert, "exp_alerts": exp})
        tests.append({"name": name, "interval": "1m", "input_series": _series(m),
                      "alert_rule_test": cases})
    spec = tmp_path / "tests.yml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules_file.name],
                                    "evaluation_interval": "1m", "tests": tests}))
    ran = subprocess.run([PROMTOOL, "test", "rules", str(spec)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert list(itertools.chain(SCENARIOS)) == list(SCENARIOS)  # every scenario ran above
