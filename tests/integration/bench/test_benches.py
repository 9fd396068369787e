"""Every benchmark runs: `stratacrawl bench NAME --smoke --json` (seconds, on the test's
tiers) emits each figure its module names in ``FIGURES``, as a number, with the baseline
and ratio fields. A change that breaks a benchmark fails here, not months later on the
day its figure is needed."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from stratacrawl.services import Endpoints
from tests.support.processes import endpoints_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
HELPERS = {"figure", "servers", "site", "peer_spider", "load"}   # modules that are no benchmark
BENCHES = sorted(p.stem for p in (ROOT / "bench").glob("*.py")
                 if not p.stem.startswith("_") and p.stem not in HELPERS)


def test_every_bench_module_is_a_benchmark() -> None:
    """A new module in bench/ is a benchmark (with run and FIGURES) or a named helper."""
    assert len(BENCHES) >= 15
    for name in BENCHES:
        module = importlib.import_module(f"bench.{name}")
        assert callable(module.run) and module.FIGURES, name


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", BENCHES)
def test_a_benchmark_emits_its_figures_at_smoke_size(name: str, tier_endpoints: Endpoints,
                                                      tmp_path: Path) -> None:
    env = {**endpoints_env(tier_endpoints, tmp_path), "STRATACRAWL_LOADTEST_VIA": "processes"}
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "bench", name, "--smoke", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=840)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    figures = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    expected = importlib.import_module(f"bench.{name}").FIGURES
    assert [f["metric"] for f in figures] == list(expected), done.stdout
    for f in figures:
        assert f["bench"] == name and isinstance(f["value"], int | float), f
        assert math.isfinite(f["value"]) and {"baseline", "ratio", "unit"} <= set(f), f


@pytest.mark.timeout(600)
def test_peers_on_noisy_sites_reports_the_latency_bound(tier_endpoints: Endpoints,
                                                        tmp_path: Path) -> None:
    # No end demotion in the crawls: all their warm indexing is left to the bench's count.
    env = {**endpoints_env(tier_endpoints, tmp_path), "STRATACRAWL_END_DEMOTION_S": "0"}
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "bench", "peers", "--noise",
                           "--smoke", "--json"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    wall = json.loads(done.stdout.splitlines()[0])
    assert wall["metric"] == "peer_wall_ratio" and wall["sites"] == "noisy"
    assert wall["bound_s"] > 0 and set(wall["of_bound"]) == {"stratacrawl", "scrapy"}
    # Both crawlers fetched every page of the two slow sites (~20 items each).
    assert all(r["pages"] >= 40 for rs in wall["runs"].values() for r in rs), wall["runs"]
    # What the crawl left to the demotion deployment was indexed after it and counted.
    assert all(r["demoted_after_exit"] >= 40 for r in wall["runs"]["stratacrawl"]), wall["runs"]


def test_a_benchmark_without_noisy_sites_refuses_noise() -> None:
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "bench", "cli", "--noise",
                           "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "bench cli takes no --noise" in done.stdout + done.stderr
