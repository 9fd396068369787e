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
