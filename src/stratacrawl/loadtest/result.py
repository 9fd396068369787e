"""A load test's configuration, its samples and its result (what ``report`` writes)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

VIAS = ("processes", "prefect")  # how workers run: crawl processes, or Prefect flow runs


@dataclass
class LoadTestConfig:
    workers: int = 3
    sources: int = 200
    minutes: float = 10.0
    seed: int = 7
    rate: float = 12.0             # per source, requests/s (the crawler's limit)
    concurrency: int = 16          # batches (= requests in flight) per source
    batch_size: int = 10
    max_batches: int = 1000        # per worker
    kill_at: float | None = 0.5    # share of the run after which one worker is killed
    backlog: int | None = None     # items per source (default: enough for the run)
    lease_s: float = 60.0          # how soon a dead worker's tasks go to the others
    pg_pool_size: int = 24         # per worker: a thousand batches share it
    sample_s: float = 2.0
    drain_limit_s: float = 300.0   # how long cleaning may catch up after the run
    first_host: int = 10
    via: str = "processes"         # or "prefect": workers of a Prefect process work pool
    redis_cluster: int = 0         # nodes of the Redis Cluster the hot tier ran on (0: one)

    def __post_init__(self) -> None:
        if self.via not in VIAS:
            raise ValueError(f"via={self.via!r}: expected one of {', '.join(VIAS)}")

    def items_per_source(self) -> int:
        if self.backlog:
            return self.backlog
        return max(200, math.ceil(1.3 * 1500 * self.minutes * 60 / self.sources))


@dataclass
class Sample:
    t: float
    landed: dict[str, int]
    backlog: int
    staged: int
    uncleaned: int
    records: int

    @property
    def total(self) -> int:
        return sum(self.landed.values())


@dataclass
class LoadTestResult:
    config: LoadTestConfig
    seconds: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    processes: dict[str, dict[str, float]] = field(default_factory=dict)
    # CPU milliseconds per landed page, by component (fetch workers, cleaner, simulator,
    # Prefect, and each storage server), over the whole run and its cleaning drain
    cpu_ms_per_page: dict[str, float] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    killed: dict[str, Any] = field(default_factory=dict)
    flow_runs: dict[str, str] = field(default_factory=dict)  # via Prefect: worker -> state
    killed_at: float | None = None  # wall-clock time of the kill
    sim_lag_ms: dict[int, float] = field(default_factory=dict)  # second -> simulator loop lag
    sim_gc: dict[str, list[float]] = field(default_factory=dict)  # its GcPauses
    sim_polls_failed: int = 0  # stats requests the simulator did not answer in time
    sim_reniced: bool = False  # whether the simulator ran ahead of the others (root only)
    # what kept the run from measuring anything: worker -> why (an exit code and the last
    # line of its log), "run" -> no page staged at all. A failed load test exits non-zero.
    failed: dict[str, str] = field(default_factory=dict)


def result_json(result: LoadTestResult) -> str:
    return json.dumps({"config": result.config.__dict__, "seconds": round(result.seconds, 1),
                       "figures": result.figures, "workers": result.workers,
                       "processes": result.processes,
                       "cpu_ms_per_page": result.cpu_ms_per_page, "killed": result.killed,
                       "flow_runs": result.flow_runs}, indent=2)
