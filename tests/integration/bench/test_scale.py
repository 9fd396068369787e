"""``bench scale``: its URL generator, and a 100,000-URL run whose figures hang together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.scale import STEPS, generate, generate_at, host
from stratacrawl.services import Endpoints
from stratacrawl.urls import canonicalize, fingerprint
from tests.support.processes import endpoints_env

ROOT = Path(__file__).resolve().parents[3]


def test_generated_urls_are_canonical_distinct_and_fingerprinted_as_the_crawler_does() -> None:
    g = generate(0, 50_000, sources=1000, queued_share=0.2)
    assert len(set(g.urls)) == len(g.urls)
    sample = g.urls[::10]
    assert [canonicalize(u) for u in sample] == sample
    assert g.fingerprints[:2000] == [fingerprint(u) for u in g.urls[:2000]]
    shapes = {u.split("/", 4)[3].split("?")[0] for u in g.urls}
    assert {"news", "product", "category", "p", "search", "blog"} <= shapes
    assert 0.19 < g.queued.mean() < 0.21
    assert len(set(g.sources.tolist())) == 1000
    assert len({host(s) for s in range(10_000)}) == 10_000


def test_url_i_is_the_same_in_every_call() -> None:
    whole = generate(0, 2000, sources=50, queued_share=0.5)
    part = generate(700, 300, sources=50, queued_share=0.5)
    assert part.urls == whole.urls[700:1000]
    assert part.queued.tolist() == whole.queued[700:1000].tolist()
    picked = generate_at(np.array([1999, 3], dtype=np.uint64), sources=50, queued_share=0.5)
    assert picked.urls == [whole.urls[1999], whole.urls[3]]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(600)
def test_a_100k_frontier_run_reports_consistent_growth(tier_endpoints: Endpoints,
                                                        tmp_path: Path) -> None:
    env = endpoints_env(tier_endpoints, tmp_path)
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "bench", "scale", "--smoke",
                           "--known", "100000", "--queued", "20000", "--sources", "50", "--json"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    f = {x["metric"]: x for x in map(json.loads, done.stdout.splitlines()) if x}
    steps = [f"{s:.0%}" for s in STEPS]
    for metric in ("redis_used_memory_mb", "dedup_checks_per_s", "claims_per_s",
                   "recovery_full_s", "cold_bytes_per_known_url", "crawler_rss_mb"):
        assert list(f[metric]["by_step"]) == steps, metric
    assert f["redis_used_memory_mb"]["known_urls"] == 100_000
    assert 18_000 < f["claims_per_s"]["queued_tasks"] < 22_000
    assert f["claims_per_s"]["double_claims"] == 0
    # The filter is allocated at its capacity: Redis holds at least it after a recovery.
    redis = f["redis_used_memory_mb"]
    assert redis["value"] >= redis["bloom_mb"] > 1
    assert 50 < f["cold_bytes_per_known_url"]["value"] < 2000
    cold = f["cold_bytes_per_known_url"]["by_step"]
    assert cold["1%"] > cold["100%"]          # fixed overheads spread over more URLs
    recovery = f["recovery_full_s"]
    assert recovery["steps"]["rebuild Bloom filter"] >= 0 and recovery["baseline"] > 0
    assert f["crawler_rss_mb"]["pages_staged"] > 0 and f["crawler_rss_mb"]["value"] > 30
    assert f["sink_docs_per_s"]["warm_docs"] > 0


def test_sizes_are_checked_before_anything_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "bench", "scale", "--known",
                           "1000", "--queued", "5000"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "--queued 5000 is more than --known 1000" in done.stderr
    done = subprocess.run([sys.executable, "-m", "stratacrawl", "bench", "dedup", "--known",
                           "1000"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "bench dedup takes no --known" in done.stderr
