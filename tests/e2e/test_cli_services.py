"""The CLI as a user runs it: services, doctor, sources validate — on embedded defaults."""

import time
from pathlib import Path

import pytest

from tests.support.processes import cli, processes_under

pytestmark = pytest.mark.e2e

EMBEDDED = {"STRATACRAWL_REDIS_URL": "", "STRATACRAWL_DATABASE_URL": "",
            "STRATACRAWL_ELASTICSEARCH_URL": ""}


def _env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in EMBEDDED.items()}
    env["STRATACRAWL_STATE_DIR"] = str(state)
    env.update(extra)
    return env


def _clean(env: dict[str, str]) -> dict[str, str]:
    # An empty variable would be read as a URL; drop them so the tier is embedded.
    import os

    out = {k: v for k, v in os.environ.items() if not k.startswith("STRATACRAWL_")}
    out.update({k: v for k, v in env.items() if v})
    return out


@pytest.mark.slow
def test_services_up_status_down_leaves_no_process(tmp_path: Path) -> None:
    env = _clean(_env(tmp_path))
    up = cli("services", "up", env=env)
    if up.returncode != 0:
        cli("services", "down", env=env)
    assert up.returncode == 0, up.stderr
    for tier in ("redis", "elasticsearch", "postgres"):
        assert f"{tier}" in up.stdout and "embedded" in up.stdout
    assert processes_under(tmp_path), "servers should be running"
    status = cli("services", "status", env=env)
    assert status.stdout.count("embedded") == 3
    down = cli("services", "down", env=env)
    assert down.returncode == 0
    assert "postgres" in down.stdout and "redis" in down.stdout
    time.sleep(0.5)
    assert processes_under(tmp_path) == []
    assert cli("services", "status", env=env).stdout.count("stopped") == 3


@pytest.mark.slow
def test_doctor_passes_on_embedded_defaults_and_cleans_up(tmp_path: Path) -> None:
    result = cli("doctor", env=_clean(_env(tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("Redis", "Elasticsearch", "PostgreSQL", "Prefect"):
        assert f"✓ {name}" in result.stdout
    time.sleep(0.5)
    assert processes_under(tmp_path) == []


def test_doctor_names_an_unreachable_database_quickly(tmp_path: Path) -> None:
    bad = "postgresql://127.0.0.1:1/x"
    t0 = time.monotonic()
    result = cli("doctor", env=_clean(_env(tmp_path, STRATACRAWL_DATABASE_URL=bad)))
    elapsed = time.monotonic() - t0
    assert result.returncode == 3  # a tier unreachable
    assert f"PostgreSQL at {bad}" in result.stdout
    assert "failed: PostgreSQL" in result.stdout
    assert elapsed < 15  # the check itself is bounded at 5 s; the rest is interpreter start


def test_sources_validate_reports_every_problem(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("sources:\n"
                 "  - {id: a, seeds: ['http://x/'], allow: ['[z-a]']}\n"
                 "  - {id: a, seeds: ['http://y/'], rate: -1, speed: 3}\n")
    result = cli("sources", "validate", str(f))
    assert result.returncode == 1
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("✗")]
    assert len(lines) == 4
    for needle in ("allow: bad regular expression", "id: duplicate id", "rate:", "speed: unknown key"):
        assert any(needle in ln and str(f) in ln and "source 'a'" in ln for ln in lines), needle


def test_sources_validate_accepts_a_good_file(tmp_path: Path) -> None:
    f = tmp_path / "ok.yaml"
    f.write_text("sources:\n  - {id: a, seeds: ['http://x/']}\n")
    result = cli("sources", "validate", str(f))
    assert result.returncode == 0 and "1 source(s): a" in result.stdout


@pytest.mark.slow
def test_concurrent_starts_share_one_set_of_servers(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = _clean(_env(tmp_path))
    try:
        procs = [subprocess.Popen([sys.executable, "-m", "stratacrawl", "services", "up"],
                                  env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outputs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(p.returncode == 0 for p in procs)
        assert outputs[0] == outputs[1]  # the same URLs: one server per tier
        redis_servers = [c for c in processes_under(tmp_path) if "redis-server" in c]
        assert len(redis_servers) == 1, redis_servers
    finally:
        assert cli("services", "down", env=env).returncode == 0
    time.sleep(0.5)
    assert processes_under(tmp_path) == [], os.listdir(tmp_path)


@pytest.mark.slow
def test_a_crashed_embedded_server_comes_back_on_its_address(tmp_path: Path) -> None:
    """Redis killed, then ``services up`` again: the same URL, so a running crawl's client
    reconnects by itself (it came back on a new port, and the crawl could not find it)."""
    import json
    import os
    import signal

    env = _clean(_env(tmp_path))
    try:
        assert cli("services", "up", env=env).returncode == 0
        before = json.loads((tmp_path / "services.json").read_text())
        os.kill(before["redis"]["pid"], signal.SIGKILL)
        time.sleep(0.5)
        again = cli("services", "up", env=env)
        assert again.returncode == 0, again.stderr
        after = json.loads((tmp_path / "services.json").read_text())
        assert after["redis"]["pid"] != before["redis"]["pid"]
        assert after["redis"]["url"] == before["redis"]["url"]
        assert after["elasticsearch"]["url"] == before["elasticsearch"]["url"]
    finally:
        cli("services", "down", env=env)
