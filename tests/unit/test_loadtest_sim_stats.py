"""The load test's polls of the simulator: one that does not answer ends nothing."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import httpx

from stratacrawl.loadtest.result import LoadTestConfig, LoadTestResult
from stratacrawl.loadtest.run import _sim_arrivals
from stratacrawl.services.embedded import free_port
from stratacrawl.sim import SimulatorThread, build_specs
from tests.support.hosts import hosts


def test_a_source_that_does_not_answer_is_counted_and_skipped() -> None:
    specs = build_specs(2, 7, first_host=hosts())
    with SimulatorThread(specs):
        for s in specs:
            httpx.get(s.base_url + "/robots.txt")                      # one arrival each
        sources = [{"url": f"http://127.0.0.1:{free_port()}"}]        # nobody listens
        sources += [{"url": s.base_url} for s in specs]
        result = LoadTestResult(LoadTestConfig(sources=2))
        arrivals: dict[str, dict[int, int]] = defaultdict(dict)
        _sim_arrivals(SimpleNamespace(sources=sources), arrivals, result)  # type: ignore[arg-type]
    assert result.sim_polls_failed == 1
    assert {sid: sum(per.values()) for sid, per in arrivals.items()} == {
        s.id: 1 for s in specs}                                        # the others were read
    assert result.sim_gc and len(result.sim_gc["count"]) == 3
