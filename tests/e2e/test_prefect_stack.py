"""`stratacrawl up`: the Prefect UI serves, deployments appear, a run completes on the worker;
`stratacrawl down` leaves nothing behind."""

import http.server
import json
import os
import signal
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from deployments.automations import CRASH_UNRESPONSIVE
from flows.common import WARM_WRITER
from stratacrawl.loadtest.report import ARTIFACT_KEY, publish_artifact
from stratacrawl.services.embedded import free_port
from stratacrawl.stack import HEARTBEAT_S
from tests.support.processes import cli, processes_under
from tests.support.webhook import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_up_deploys_and_runs_on_the_worker_then_down(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STRATACRAWL_", "PREFECT_"))}
    env["STRATACRAWL_STATE_DIR"] = str(tmp_path)
    api = f"http://127.0.0.1:{port}/api"
    try:
        up = cli("up", "--port", str(port), env=env, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"http://127.0.0.1:{port}" in up.stdout
        # No sources file here: what needs one is paused, said in one line; the rest runs
        out = " ".join(up.stdout.split())
        assert "no sources file (looked for sources.yaml in" in out and "nor in" in out, out
        assert "stratacrawl up --demo" in out
        ui = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert ui.status_code == 200 and "<html" in ui.text.lower()
        deployments = httpx.post(f"{api}/deployments/filter", json={}, timeout=10).json()
        names = {d["name"] for d in deployments}
        assert {"health", "fetch", "demotion"} <= names
        limits = httpx.post(f"{api}/v2/concurrency_limits/filter", json={}, timeout=10).json()
        assert {(gl["name"], gl["limit"]) for gl in limits} >= {
            (WARM_WRITER, 1), ("stratacrawl-fetch-runs", os.cpu_count()),
            ("stratacrawl-discovery-runs", 1), ("stratacrawl-staging-load-runs", 1)}
        # every limit carries a name a person can read (Prefect's own: deployment:<uuid>)
        assert not [gl["name"] for gl in limits if gl["name"].startswith("deployment:")]
        automations = httpx.post(f"{api}/automations/filter", json={}, timeout=10).json()
        crash = next(a for a in automations if a["name"] == CRASH_UNRESPONSIVE)
        assert crash["enabled"] and crash["actions"][0]["state"] == "CRASHED"
        assert crash["trigger"]["within"] == 3 * HEARTBEAT_S
        zombie = _a_run_that_stops_beating(api)
        active = {d["name"]: all(s["active"] for s in d["schedules"])
                  for d in deployments if d["schedules"]}
        assert not any(active[n] for n in ("discovery", "fetch", "cleaning", "monitor",
                                           "validation-hourly", "tier-sinking")), active
        assert all(active[n] for n in ("health", "demotion", "compensation", "staging-load")), active
        dep = next(d for d in deployments if d["name"] == "health")
        run = _start_run(api, dep["id"])
        state = _wait_for_run(api, run["id"], 180)
        assert state == "COMPLETED", (tmp_path / "prefect" / "prefect-worker.log").read_text()[-3000:]
        # The core's own log lines (not just Prefect's) are in the run's log in the UI. Logs
        # are shipped in batches and stored by the server on its own time: wait for them.
        logs: list = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            logs = httpx.post(f"{api}/logs/filter", json={"logs": {"flow_run_id": {
                "any_": [run["id"]]}}}, timeout=10).json()
            if any(e["name"].startswith("stratacrawl") and e["message"].startswith(
                    "tiers ready") for e in logs):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"no 'tiers ready' from stratacrawl in the run's log: "
                                 f"{[(e['name'], e['message'][:60]) for e in logs]}")
        # `up` started a recovery run on the worker (hot rebuilt from cold at worker start)
        recovery = next(d for d in deployments if d["name"] == "recovery")
        runs: list = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            runs = httpx.post(f"{api}/flow_runs/filter", json={"deployments": {
                "id": {"any_": [recovery["id"]]}}}, timeout=10).json()
            if runs and runs[0]["state"]["type"] in {"COMPLETED", "FAILED", "CRASHED"}:
                break
            time.sleep(1)
        assert runs and runs[0]["state"]["type"] == "COMPLETED", runs
        # A load-test report becomes a Markdown artifact on the Prefect API in use.
        report = tmp_path / "loadtest.md"
        report.write_text("# Load test: 3 workers\n\n| figure | ours |\n")
        assert publish_artifact(report, api) == api
        found = httpx.post(f"{api}/artifacts/filter", json={"artifacts": {"key": {
            "any_": [ARTIFACT_KEY]}}}, timeout=10).json()
        assert [a["type"] for a in found] == ["markdown"]
        assert found[0]["data"].startswith("# Load test: 3 workers")
        assert publish_artifact(report, f"http://127.0.0.1:{free_port()}/api") is None
        _crashed_for_its_silence(api, zombie)
    finally:
        down = cli("down", env=env, timeout=120)
    assert down.returncode == 0
    time.sleep(1)
    assert processes_under(tmp_path) == []


def _a_run_that_stops_beating(api: str) -> tuple[str, float]:
    """A Running run with one heartbeat and then none (its host lost): (its id, when)."""
    flow = _created(f"{api}/flows/", {"name": "zombie-probe"})
    run = _created(f"{api}/flow_runs/", {"flow_id": flow["id"], "state": {"type": "RUNNING"}})
    assert run["state"]["type"] == "RUNNING"
    beat = {"id": str(uuid.uuid4()), "event": "prefect.flow-run.heartbeat",
            "occurred": datetime.now(UTC).isoformat(),
            "resource": {"prefect.resource.id": f"prefect.flow-run.{run['id']}"}}
    assert httpx.post(f"{api}/events", json=[beat], timeout=10).status_code == 204
    return run["id"], time.monotonic()


def _crashed_for_its_silence(api: str, zombie: tuple[str, float]) -> None:
    """The "crash unresponsive flow runs" automation does what it says: the run is
    Crashed once three heartbeat periods pass without one."""
    run_id, since = zombie
    state: dict = {}
    while time.monotonic() - since < 3 * HEARTBEAT_S + 60:
        state = httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()["state"]
        if state["type"] != "RUNNING":
            break
        time.sleep(2)
    assert state["type"] == "CRASHED", state
    assert f"No heartbeat for {3 * HEARTBEAT_S} s" in state["message"], state


def _start_run(api: str, deployment_id: str) -> dict:
    """A run of the deployment, created now."""
    return _created(f"{api}/deployments/{deployment_id}/create_flow_run", {})


def _created(url: str, payload: dict) -> dict:
    """What a POST that creates an object (a flow, a flow run) returns. Right after `up`
    the scheduler creates runs of the scheduled deployments at the same time (SQLite): a
    create may be refused for a moment; it must succeed within a few tries."""
    for _ in range(20):
        resp = httpx.post(url, json=payload, timeout=10)
        made = resp.json() if resp.headers.get("content-type", "").startswith(
            "application/json") else {}
        if resp.status_code < 300 and "id" in made:
            return dict(made)
        time.sleep(1)
    raise AssertionError(f"POST {url} kept failing: {resp.status_code} {resp.text[:500]}")


def _wait_for_run(api: str, run_id: str, seconds: float) -> str | None:
    """The run's final state type (None: not final within ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()["state"]["type"]
        if state in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}:
            return str(state)
        time.sleep(1)
    return None


def _runs(api: str, messages: bool = False) -> list[Any]:
    """(deployment, state type) of every run that left the schedule; with ``messages``
    (deployment, state type, state message)."""
    deps = {d["id"]: d["name"] for d in httpx.post(f"{api}/deployments/filter", json={},
                                                     timeout=10).json()}
    runs = httpx.post(f"{api}/flow_runs/filter", json={"flow_runs": {"state": {"type": {
        "not_any_": ["SCHEDULED"]}}}}, timeout=10).json()
    if messages:
        return [(deps.get(r["deployment_id"], "?"), r["state_type"],
                 (r.get("state") or {}).get("message") or "") for r in runs]
    return [(deps.get(r["deployment_id"], "?"), r["state_type"]) for r in runs]


def _runs_of(api: str, deployment_id: str, *states: str) -> list[dict]:
    """The deployment's runs whose state type is one of ``states``."""
    return list(httpx.post(f"{api}/flow_runs/filter", json={
        "deployments": {"id": {"any_": [deployment_id]}},
        "flow_runs": {"state": {"type": {"any_": list(states)}}}}, timeout=10).json())


def _fetch_runs_quiet(api: str, deployment_id: str) -> None:
    """Pause the fetch deployment's schedule (its scheduled runs are deleted) and wait
    for its runs under way to end; a run created by hand still runs."""
    resp = httpx.post(f"{api}/deployments/{deployment_id}/pause_deployment", timeout=10)
    assert resp.status_code < 300, resp.text
    deadline = time.monotonic() + 240
    going: list = []
    while time.monotonic() < deadline:
        going = [(r["name"], r["state_type"])
                 for r in _runs_of(api, deployment_id, "SCHEDULED", "PENDING", "RUNNING")]
        if not going:
            return
        time.sleep(2)
    raise AssertionError(f"fetch runs still going 240 s after the pause: {going}")


def _failed(runs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Runs that failed or crashed. A validation run may fail by design here: the hourly
    one (at :15) gates a source-day the demo has not cleaned records of yet."""
    return [r for r in runs if r[1] in {"FAILED", "CRASHED"}
            and not r[0].startswith("validation")]


@pytest.mark.timeout(900)   # a stack start, a minute of scheduled runs, an alert held and fired
def test_up_demo_runs_green_and_a_fired_alert_reaches_the_webhook(tmp_path: Path) -> None:
    """`up --demo`: the simulator's sites are crawled by the scheduled runs, which end
    Completed; `sim break` on one of them fails the next fetch run that meets it, naming
    it, raises a P1 alert the ops page shows, and the automation posts it to the webhook
    given to `up` (docs/operations.md's "See an alert")."""
    port = free_port()
    receiver = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STRATACRAWL_", "PREFECT_"))}
    env.update(STRATACRAWL_STATE_DIR=str(tmp_path), STRATACRAWL_ALERT_HOLD_S="0")
    api = f"http://127.0.0.1:{port}/api"
    try:
        ops = free_port()
        up = cli("up", "--port", str(port), "--demo", "--demo-sources", "2",
                 "--alert-webhook", hook, "--ops-port", str(ops), env=env, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "no sources file" not in up.stdout
        # the webhook URL is a secret of its block: masked when read without secrets
        documents = httpx.post(f"{api}/block_documents/filter",
                               json={"include_secrets": False}, timeout=10).json()
        alert_block = next(d for d in documents if d["name"] == "stratacrawl-alerts")
        assert hook not in json.dumps(alert_block), alert_block
        # the ops page, and the Data Docs one click away under it
        assert f"Ops page:     http://127.0.0.1:{ops}" in up.stdout, up.stdout
        assert httpx.get(f"http://127.0.0.1:{ops}/", timeout=30).status_code == 200
        # the CLI finds the platform's sources file without being told, and says so
        assert f"sources file: {tmp_path / 'demo-sources.yaml'}" in up.stdout, up.stdout
        rules = cli("url-rules", env=env, cwd=tmp_path)
        assert rules.returncode == 0 and "the platform's" in rules.stderr, rules.stderr
        sources = tmp_path / "demo-sources.yaml"
        doc = yaml.safe_load(sources.read_text())
        assert len(doc["sources"]) == 2
        # Scheduled fetch, staging-load and monitor runs (every minute) complete; no run fails
        want = {"fetch", "staging-load", "monitor"}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            runs = _runs(api)
            if want <= {n for n, st in runs if st == "COMPLETED"}:
                break
            time.sleep(2)
        bad = _failed(runs)
        assert want <= {n for n, st in runs if st == "COMPLETED"} and not bad, (
            runs, (tmp_path / "prefect" / "prefect-worker.log").read_text()[-3000:])
        # docs/operations.md's "See an alert": `sim break` makes every answer of a demo source a
        # 5xx; the next fetch run fails naming it, the monitor fires P1 success_rate, the
        # automation posts it to the webhook and the ops page shows the source alerting.
        broken = doc["sources"][0]["id"]
        deps = {d["name"]: d["id"] for d in httpx.post(f"{api}/deployments/filter", json={},
                                                       timeout=10).json()}
        # A fetch run already going when the source breaks has its successes of before the
        # break in its rate and may rightly end Completed (and the broken pages then wait
        # out their retry delay): the fetch schedule is paused and the runs going let end,
        # so the run started below is the first to meet the source broken.
        _fetch_runs_quiet(api, deps["fetch"])
        t0 = time.monotonic()
        brk = cli("sim", "break", broken, "--errors", "1.0", env=env, cwd=tmp_path)
        assert brk.returncode == 0 and f"{broken}: broken" in brk.stdout, brk.stdout + brk.stderr
        # Its lists, unchanged since the demo's crawl, are due again only when their grown
        # re-crawl interval ends (up to the demo's 5 minutes): submitting its seeds makes
        # work of it due now, as the operations guide says.
        sub = cli("submit", *doc["sources"][0]["seeds"], "--source", broken, env=env, cwd=tmp_path)
        assert sub.returncode == 0, sub.stdout + sub.stderr
        # The fetch run started now meets it and fails, naming it; then a monitor run fires
        # the alert.
        _start_run(api, deps["fetch"])
        failed = None
        while failed is None and time.monotonic() - t0 < 150:
            failed = next((m for name, st, m in _runs(api, messages=True)
                           if name == "fetch" and st == "FAILED" and f"{broken}: 0 of" in m), None)
            time.sleep(2)
        assert failed is not None, _runs(api, messages=True)
        assert "1 of 2 source(s) failed" in failed, failed
        # the scheduled fetches go on meeting it as its lists come due
        resp = httpx.post(f"{api}/deployments/{deps['fetch']}/resume_deployment", timeout=10)
        assert resp.status_code < 300, resp.text
        assert _wait_for_run(api, _start_run(api, deps["monitor"])["id"], 150) == "COMPLETED"
        # (With no hold, as here, the scheduled runs going on beside these may fire other
        # alerts of a moment first: the one wanted is looked for among all received.)
        subject = f"Stratacrawl P1 success_rate on {broken}"
        # The rate is over the last 5 minutes: right after the demo's first crawl, its
        # successes outweigh the failures for a while (docs/operations.md: "See an alert").
        while time.monotonic() - t0 < 330 and not any(
                n["json"]["subject"] == subject for n in Receiver.received):
            time.sleep(1)
        note = next((n for n in Receiver.received if n["json"]["subject"] == subject), None)
        page = httpx.get(f"http://127.0.0.1:{ops}/", timeout=30).text
        row = page[page.index(f"data-source='{broken}'"):][:600]
        assert note is not None, (failed, row, Receiver.received, _runs(api), (
            tmp_path / "prefect" / "prefect-worker.log").read_text()[-3000:])
        assert note["path"] == "/hook"
        # (the rate over the last 5 minutes: failures since the break among earlier successes)
        assert f"{broken}: fetch success" in note["json"]["body"] and "< 90%" in note["json"]["body"]
        assert "alerting" in row, row
        print(f"sim break -> alert at the webhook: {time.monotonic() - t0:.0f} s")
        # Only fetch runs fail, and only since the source was broken (it is in each).
        assert {name for name, _ in _failed(_runs(api))} <= {"fetch"}
    finally:
        receiver.shutdown()
        down = cli("down", env=env, timeout=120)
    assert down.returncode == 0 and "site-simulator" in down.stdout
    time.sleep(1)
    assert processes_under(tmp_path) == []


def _blocks(api: str) -> list[dict]:
    return sorted(httpx.post(f"{api}/block_documents/filter", json={}, timeout=10).json(),
                  key=lambda b: b["name"] or "")


@pytest.mark.timeout(900)   # two stack starts, a run on each side of a restart
def test_a_restart_mid_run_resumes_and_a_second_platform_is_refused(tmp_path: Path) -> None:
    """`down` while a fetch run is Running, then `up`: the run is marked Crashed (its
    concurrency slot freed), a fetch run completes within two minutes of the restart,
    nothing of the earlier life stays Running and no fetch run is cancelled by the
    deployment's limit. Meanwhile a platform of another state folder aimed at the same
    server is refused, exit 2 in one line naming the owner, and changes nothing."""
    port, ops = free_port(), free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("STRATACRAWL_", "PREFECT_"))}
    # Three fetch slots: after a restart the newest missed scheduled run, the operator's run
    # and the next minute's scheduled run may all be running at once (a run lasts a minute
    # plus its start), which two slots would rightly refuse; a slot leaked by the earlier
    # life is still caught, by the slot count below.
    env = {**base, "STRATACRAWL_STATE_DIR": str(tmp_path / "a"), "STRATACRAWL_FETCH_RUNS": "3"}
    api = f"http://127.0.0.1:{port}/api"
    args = ("up", "--port", str(port), "--demo", "--demo-sources", "1", "--ops-port", str(ops))
    try:
        up = cli(*args, env=env, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr
        deps = {d["name"]: d["id"] for d in httpx.post(f"{api}/deployments/filter", json={},
                                                       timeout=10).json()}
        before = _blocks(api)
        # A second platform (another state folder) on the same port: refused, nothing changed
        other = cli("up", "--port", str(port), env={**base, "STRATACRAWL_STATE_DIR": str(
            tmp_path / "b")}, timeout=120)
        assert other.returncode == 2, other.stdout + other.stderr
        message = " ".join(other.stderr.split())
        assert f"belongs to the platform of {(tmp_path / 'a').resolve()}" in message, message
        assert "another --port, or --take-over" in message
        assert _blocks(api) == before
        assert not (tmp_path / "b" / "services.json").exists()
        # `down` under a Running fetch run: the run drains and ends, or `down` marks it
        # Crashed (and says so) — it is never left Running
        run = _running_fetch(api, deps["fetch"])
        down = cli("down", env=env, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        _up_and_a_fetch_completes(api, args, env, deps["fetch"], tmp_path)
        assert _state(api, run) in FINAL, down.stdout
        # kill -9 of the worker, the run's process (a session of its own) and the server
        # under a Running fetch run, as a lost host would: `up` finds the run Running
        # with its process gone and marks it Crashed first
        run = _running_fetch(api, deps["fetch"])
        registry = json.loads((tmp_path / "a" / "services.json").read_text())
        pid = int(httpx.get(f"{api}/flow_runs/{run['id']}", timeout=10).json()[
            "infrastructure_pid"])
        for group in (registry["prefect-worker"]["pid"], pid, registry["prefect-server"]["pid"]):
            os.killpg(group, signal.SIGKILL)
        time.sleep(1)
        up = _up_and_a_fetch_completes(api, args, env, deps["fetch"], tmp_path)
        assert "earlier runs: marked Crashed" in up, up
        assert _state(api, run) == "CRASHED"
        runs = _runs(api, messages=True)
        assert not [r for r in runs if "concurrency limit" in r[2]], runs
        _slots_match_live_runs(api, deps["fetch"])
        assert not [r for r in runs if r[1] in ("RUNNING", "PENDING") and r[0] != "fetch"
                    and r[0] != "cleaning"], runs
    finally:
        cli("down", env=env, timeout=120)
    time.sleep(1)
    assert processes_under(tmp_path) == []


FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _slots_match_live_runs(api: str, deployment_id: str) -> None:
    """The deployment's concurrency limit holds one slot per run of it that is Pending or
    Running now: none is held for a run of an earlier life. (Runs start and end beside
    this check: it must hold at one moment within 30 s.)"""
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        dep = httpx.get(f"{api}/deployments/{deployment_id}", timeout=10).json()
        live = _runs_of(api, deployment_id, "PENDING", "RUNNING")
        held = dep["global_concurrency_limit"]["active_slots"]
        if held == len(live):
            return
        seen.append((held, len(live)))
        time.sleep(1)
    raise AssertionError(f"slots held vs runs live, never equal: {seen}")


def _state(api: str, run: dict) -> str:
    return str(httpx.get(f"{api}/flow_runs/{run['id']}", timeout=10).json()["state"]["type"])


def _running_fetch(api: str, deployment_id: str) -> dict:
    """A fetch run started now, once it is Running."""
    run = _start_run(api, deployment_id)
    deadline = time.monotonic() + 120
    while _state(api, run) != "RUNNING":
        assert time.monotonic() < deadline, "the fetch run never ran"
        time.sleep(1)
    return run


def _up_and_a_fetch_completes(api: str, args: tuple[str, ...], env: dict[str, str],
                              deployment_id: str, tmp_path: Path) -> str:
    """`up` again; a fetch run of the new life completes within two minutes (none is
    cancelled by the deployment's limit). Returns what `up` printed."""
    up = cli(*args, env=env, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    restarted = time.monotonic()
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    _start_run(api, deployment_id)   # beside the scheduled ones, as an operator would
    completed = None
    while completed is None and time.monotonic() - restarted < 120:
        completed = next((r for r in httpx.post(f"{api}/flow_runs/filter", json={
            "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}},
                          "start_time": {"after_": since}},
            "deployments": {"id": {"any_": [deployment_id]}}}, timeout=10).json()), None)
        time.sleep(2)
    assert completed is not None, (_runs(api, messages=True), (
        tmp_path / "a" / "prefect" / "prefect-worker.log").read_text()[-3000:])
    print(f"up -> a fetch run completed: {time.monotonic() - restarted:.0f} s")
    return " ".join(up.stdout.split())
