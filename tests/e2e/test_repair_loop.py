"""Records that repair themselves, on the platform of `stratacrawl up --demo`: a silent
redesign of the products site is an `integrity` alert naming its fields, which starts a
`repair` run; the run proposes rules and pauses; resumed through the Prefect API with
{"approve": true}, it writes them into the sources file as a new version, re-cleans the
failed pages and resolves the alert; `repair --rollback 1` restores the old block."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from stratacrawl.services.embedded import free_port
from tests.support.processes import cli, processes_under
from tests.support.webhook import Receiver, webhook

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _wait(what: str, check: Any, timeout_s: float, every_s: float = 3.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(every_s)


def _json(*args: str, env: dict[str, str], cwd: Path) -> Any:
    done = cli(*args, "--json", env=env, cwd=cwd, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return json.loads(done.stdout)


def _records(source: str, env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    out = cwd / "records.jsonl"
    done = cli("export", "--source", source, "--since", datetime.now(UTC).date().isoformat(),
               "--format", "jsonl", "--out", str(out), "--include-failed", env=env, cwd=cwd,
               timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


@pytest.mark.timeout(1500)
def test_a_redesign_is_alerted_repaired_on_approval_and_rolled_back(tmp_path: Path) -> None:
    port, ops = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STRATACRAWL_", "PREFECT_"))}
    env.update(STRATACRAWL_STATE_DIR=str(tmp_path), STRATACRAWL_ALERT_HOLD_S="0")
    api = f"http://127.0.0.1:{port}/api"
    with webhook() as hook:
        try:
            up = cli("up", "--port", str(port), "--demo", "--demo-sources", "2", "--alert-webhook",
                     hook, "--ops-port", str(ops), env=env, timeout=300)
            assert up.returncode == 0, up.stdout + up.stderr
            sources = tmp_path / "demo-sources.yaml"
            doc = yaml.safe_load(sources.read_text())
            products = next(s["id"] for s in doc["sources"] if s["id"].startswith("products"))
            old_block = next(s for s in doc["sources"] if s["id"] == products)["extract"]
            known = _wait("products records", lambda: (lambda r: r if len(r) >= 12 else None)(
                _records(products, env, tmp_path)), 420, 10)

            # the redesign: 200s without the fields; items already known fetched again
            brk = cli("sim", "break", products, "--redesign", env=env, cwd=tmp_path)
            assert brk.returncode == 0, brk.stdout + brk.stderr
            t0 = time.monotonic()
            urls = [r["url"] for r in known[:6]]
            sub = cli("submit", "--source", products, *urls, env=env, cwd=tmp_path)
            assert sub.returncode == 0, sub.stdout + sub.stderr

            def integrity() -> list[dict[str, Any]]:
                return [a for a in _json("alerts", env=env, cwd=tmp_path)
                        if a["kind"] == "integrity" and a["source_id"] == products]

            (alert,) = _wait("the integrity alert", integrity, 420, 5)
            alerted_s = time.monotonic() - t0
            assert {f["column"] for f in alert["details"]["failing"]} >= {"name", "price"}, alert
            assert alert["details"]["samples"], alert

            # the automation started a repair run; it proposes and pauses for its form
            def paused() -> dict[str, Any] | None:
                runs = httpx.post(f"{api}/flow_runs/filter", json={
                    "flow_runs": {"state": {"type": {"any_": ["PAUSED"]}}}}, timeout=10).json()
                return next((r for r in runs if r["parameters"].get("source") == products), None)

            run = _wait("a paused repair run", paused, 600, 5)
            proposed_s = time.monotonic() - t0
            artifacts = httpx.post(f"{api}/artifacts/filter", json={}, timeout=10).json()
            assert any(a["key"] == "stratacrawl-repair" and products in (a["data"] or "")
                       for a in artifacts)
            resumed = httpx.post(f"{api}/flow_runs/{run['id']}/resume", json={
                "run_input": {"approve": True, "comment": "checked the samples"}}, timeout=30)
            assert resumed.json().get("status") == "ACCEPT", resumed.text

            def finished() -> dict[str, Any] | None:
                state = httpx.get(f"{api}/flow_runs/{run['id']}", timeout=10).json()["state"]
                return state if state["type"] in ("COMPLETED", "FAILED", "CRASHED") else None

            state = _wait("the repair run to end", finished, 300, 3)
            applied_s = time.monotonic() - t0
            assert state["type"] == "COMPLETED" and "rules version 2" in state["message"], state
            now = yaml.safe_load(sources.read_text())
            block = next(s for s in now["sources"] if s["id"] == products)["extract"]
            assert block != old_block and block["kind"] == "rules"
            history = _json("repair", products, "--history", env=env, cwd=tmp_path)
            assert [v["version"] for v in history] == [1, 2]
            assert integrity() == []
            assert any(str(n["json"].get("subject", "")).startswith(
                f"Stratacrawl P1 integrity on {products}") for n in Receiver.received), \
                Receiver.received
            redone = {r["url"]: r for r in _records(products, env, tmp_path)}
            for r in known[:6]:   # the re-fetched items: their records whole again
                assert all(redone[r["url"]]["fields"].get(f) not in (None, "")
                           for f in ("name", "price")), redone[r["url"]]

            back = cli("repair", products, "--rollback", "1", env=env, cwd=tmp_path, timeout=300)
            assert back.returncode == 0, back.stdout + back.stderr
            again = yaml.safe_load(sources.read_text())
            assert next(s for s in again["sources"] if s["id"] == products)["extract"] == old_block
            print(f"redesign -> alert {alerted_s:.0f} s, -> paused proposal {proposed_s:.0f} s, "
                  f"-> applied {applied_s:.0f} s")
        finally:
            cli("down", env=env, timeout=120)
    time.sleep(1)
    assert processes_under(tmp_path) == []
