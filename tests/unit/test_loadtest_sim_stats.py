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


def test_a_cleaner_that_did_not_catch_up_is_counted_for_every_page() -> None:
    result = LoadTestResult(LoadTestConfig(sources=2))
    result.workers = {"worker-1": {"landed": 1000}}
    result.figures = {"pages_cleaned": 300, "cleaning_left": 600}
    cpu_per_page(result, {"fetch workers": 2.0, "cleaner": 1.2})
    # 1.2 s for 300 pages cleaned is 4 ms a page; 900 pages to clean over 1,000 landed
    assert result.cpu_ms_per_page == {"fetch workers": 2.0, "cleaner": 3.6}
    assert result.figures["cpu_ms_per_page"] == 5.6
    assert result.figures["cleaner_scaled"] == {"cleaned": 300, "left": 600}
    caught_up = LoadTestResult(LoadTestConfig(sources=2))
    caught_up.workers = result.workers
    caught_up.figures = {"pages_cleaned": 900, "cleaning_left": 0}
    cpu_per_page(caught_up, {"cleaner": 1.2})
    assert caught_up.cpu_ms_per_page == {"cleaner": 1.2} and "cleaner_scaled" not in caught_up.figures
