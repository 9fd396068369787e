"""A real Prometheus (Debian's package) scrapes a crawl's ``/metrics`` with the rules of
``stratacrawl alert-rules --format prometheus``: when the simulator breaks a source, its
P1 goes pending, then firing."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from aiohttp.test_utils import TestServer

from stratacrawl.crawl import crawl
from stratacrawl.monitor.prom_rules import rules_document
from stratacrawl.monitor.web import OpsApp
from stratacrawl.services.embedded import free_port
from stratacrawl.sim import SimulatorThread
from stratacrawl.wiring import Components
from tests.support.hosts import hosts
from tests.support.sites import small_site, sources_for

PROMETHEUS = shutil.which("prometheus")
pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is not installed (apt-get install prometheus)")]
HOLD_S = 6


@contextlib.contextmanager
def prometheus(tmp_path: Path, target: str, rules: dict) -> Iterator[str]:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [{"job_name": "stratacrawl", "static_configs": [
            {"targets": [target]}]}]}))
    port = free_port()
    with open(tmp_path / "prometheus.log", "wb") as log:
        proc = subprocess.Popen([str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
async def test_a_broken_source_goes_pending_then_firing_in_prometheus(
        comps: Components, tmp_path: Path) -> None:
    specs = small_site(2, hosts(), backlog=20)
    bad = specs[1]
    with SimulatorThread(specs) as st:
        sources = sources_for(specs, rate=100.0, batch_size=2)
        await crawl(comps, sources, until_idle=True, seconds=60, flush_s=0.3)
        bad.behaviour.error_rate = 1.0  # plain 5xx from now on
        bad.behaviour.retry_after_503 = None
        await comps.discovery.submit(sources.get(bad.id),
                                     [it["url"] for it in st.sim.truth()[bad.id]])
        await crawl(comps, sources, until_idle=False, seconds=8, flush_s=0.3)
    server = TestServer(OpsApp(comps.redis, comps.pool, sources).app(), host="127.0.0.1")
    await server.start_server()
    states: list[str] = []
    try:
        with prometheus(tmp_path, f"127.0.0.1:{server.port}",
                        rules_document(sources, HOLD_S)) as api:
            deadline = time.monotonic() + 60
            async with httpx.AsyncClient(timeout=5) as client:
                while time.monotonic() < deadline and "firing" not in states:
                    with contextlib.suppress(httpx.HTTPError):  # not up yet: 503, refused
                        resp = (await client.get(f"{api}/api/v1/alerts")).raise_for_status()
                        alerts = resp.json()["data"]["alerts"]
                        for a in alerts:
                            if a["labels"]["alertname"] == "StratacrawlSuccessRateP1":
                                assert a["labels"]["source"] == bad.id, a
                                if not states or states[-1] != a["state"]:
                                    states.append(a["state"])
                        # the healthy source raises nothing
                        assert not [a for a in alerts if a["labels"]["source"] != bad.id]
                    await asyncio.sleep(0.5)
    finally:
        await server.close()
    assert states[:2] == ["pending", "firing"], (
        states, (tmp_path / "prometheus.log").read_text()[-2000:])
