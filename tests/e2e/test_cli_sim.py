"""`stratacrawl sim serve` as a user runs it."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from stratacrawl.sources import load_sources
from tests.support.hosts import hosts

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_prints_sources_and_exits_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    sources_file = tmp_path / "sources.yaml"
    truth_file = tmp_path / "truth.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stratacrawl", "sim", "serve", "--sources", "5", "--seed", "7",
         "--first-host", "70", "--write-sources", str(sources_file),
         "--truth-file", str(truth_file)],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(5)]
    urls = [ln.split()[-1] for ln in lines]
    assert len(set(urls)) == 5 and all(u.startswith("http://127.0.0.") for u in urls)
    for url in urls:
        assert httpx.get(url + "/robots.txt").status_code == 200
    assert load_sources(sources_file).ids == ["news-1", "products-2", "prices-3", "news-4",
                                               "products-5"]
    proc.send_signal(sig)
    assert proc.wait(15) == 0
    assert json.loads(truth_file.read_text())["sources"]["news-1"]
    time.sleep(0.2)
    # No child left behind: the port is free again.
    with pytest.raises(httpx.ConnectError):
        httpx.get(urls[0] + "/", timeout=2)


def test_sim_break_breaks_a_running_source_and_fix_mends_it(tmp_path: Path) -> None:
    """`sim break` finds the source in the sources file and tells its simulator; its pages
    then fail (as a broken site's would) until `--fix`."""
    from stratacrawl.sim import SimulatorThread, build_specs
    from stratacrawl.sim.crawl_config import sources_document
    from tests.support.processes import cli

    specs = build_specs(2, 7, first_host=hosts())
    with SimulatorThread(specs):
        path = tmp_path / "sources.yaml"
        path.write_text(__import__("yaml").safe_dump(sources_document(specs)))
        target = specs[1]
        broken = cli("sim", "break", target.id, "--errors", "1.0", "--slow", "--sources",
                     str(path))
        assert broken.returncode == 0, broken.stderr
        assert f"{target.id}: broken — 100% of answers 5xx, answers in ~4 s" in broken.stdout
        assert "{" not in broken.stdout   # said in words, not a Python dict
        state = httpx.get(target.base_url + "/_sim/control").json()["behaviour"]
        assert state["error_rate"] == 1.0 and state["latency_median_ms"] == 4000.0
        assert httpx.get(specs[0].base_url + "/_sim/control").json()["behaviour"][
            "error_rate"] == 0.0   # the other source is untouched
        mended = cli("sim", "break", target.id, "--fix", "--sources", str(path))
        assert mended.returncode == 0, mended.stderr
        assert "mended — 0% of answers 5xx, usual latency" in mended.stdout, mended.stdout
        assert "alert fires" not in mended.stdout
        state = httpx.get(target.base_url + "/_sim/control").json()["behaviour"]
        assert state["error_rate"] == 0.0 and state["latency_median_ms"] == 0.0
        nothing = cli("sim", "break", target.id, "--sources", str(path))
        assert nothing.returncode == 2 and "--errors" in nothing.stderr
        unknown = cli("sim", "break", "nope", "--stop", "--sources", str(path))
        assert unknown.returncode == 2 and "nope" in unknown.stderr
