"""The load test's polls of the simulator: one that does not answer ends nothing."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import httpx

from stratacrawl.loadtest.result import LoadTestConfig, LoadTestResult
from stratacrawl.loadtest.run import _sim_arrivals
from stratacrawl.loadtest.summary import cpu_per_page
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


def test_cpu_per_page_sums_the_components_and_sizes_the_target_rate() -> None:
    result = LoadTestResult(LoadTestConfig(sources=2))
    result.workers = {"worker-1": {"landed": 600}, "worker-2": {"landed": 400}}
    cpu_per_page(result, {"fetch workers": 10.0, "postgres": 3.3})   # seconds over the run
    assert result.cpu_ms_per_page == {"fetch workers": 10.0, "postgres": 3.3}
    assert result.figures["cpu_ms_per_page"] == 13.3
    # 13.3 ms a page at 1,500 pages/s is 19.95 cores: one decimal either side of .x5
    assert result.figures["cores_for_target_rate"] in (19.9, 20.0)
