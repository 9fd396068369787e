"""Bad settings and unreachable tiers as a user meets them: one clear line naming what is
wrong, exit 1, and never a password on screen or in the logs, whatever form it is in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.support.processes import cli

pytestmark = pytest.mark.e2e

SECRET = "hunter2x"
# Every tier configured, none answering (port 1), each with its password in another form.
UNREACHABLE = {
    "STRATACRAWL_DATABASE_URL": f"host=127.0.0.1 port=1 user=u password={SECRET} dbname=x",
    "STRATACRAWL_REDIS_URL": f"redis://127.0.0.1:1/0?password={SECRET}",
    "STRATACRAWL_ELASTICSEARCH_URL": f"http://crawler:{SECRET}@127.0.0.1:1",
    "STRATACRAWL_CONNECT_TIMEOUT_S": "1",
}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATACRAWL_")}
    return {**env, **UNREACHABLE, "STRATACRAWL_STATE_DIR": str(tmp_path / "state"), **extra}


def _sources(tmp_path: Path) -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [
        {"id": "news", "seeds": ["https://news.example/"], "rate": 1}]}))
    return path


def test_doctor_and_services_status_never_show_a_password(tmp_path: Path) -> None:
    doctor = cli("doctor", env=_env(tmp_path), timeout=120)
    out = doctor.stdout + doctor.stderr
    assert doctor.returncode == 3, out  # tiers unreachable
    assert SECRET not in out
    for tier in ("Redis", "Elasticsearch", "PostgreSQL"):
        assert f"✗ {tier}" in out, out
    assert "password=***" in out and "crawler:***@" in out
    status = cli("services", "status", env=_env(tmp_path))
    assert status.returncode == 0, status.stderr
    assert SECRET not in status.stdout + status.stderr and "password=***" in status.stdout


@pytest.mark.parametrize("command", [["crawl", "--sources"], ["recover"], ["clean"]])
def test_unreachable_postgres_is_one_line_not_a_traceback(tmp_path: Path,
                                                          command: list[str]) -> None:
    sources = str(_sources(tmp_path))
    args = [*command, sources] if command[-1] == "--sources" else command
    result = cli(*args, env=_env(tmp_path, STRATACRAWL_LOG_LEVEL="DEBUG",
                                 STRATACRAWL_SOURCES=sources), timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 3, out  # a tier unreachable
    assert "Traceback" not in out, out
    assert SECRET not in out  # debug logs included
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "PostgreSQL" in errors[0], out


def test_a_malformed_database_url_is_refused_not_defaulted(tmp_path: Path) -> None:
    """It was once read as "no database named": the schema went into libpq's default."""
    env = _env(tmp_path, STRATACRAWL_DATABASE_URL=f"host=127.0.0.1 user=u password={SECRET}")
    result = cli("crawl", "--sources", str(_sources(tmp_path)), env=env, timeout=120)
    assert result.returncode == 2  # configuration
    assert "names no database" in result.stderr and SECRET not in result.stderr, result.stderr
    assert "schema migrated" not in result.stderr


@pytest.mark.slow
def test_bad_sources_files_get_one_clear_problem_each(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("sources:\n  - id: café\n".encode("latin-1"))
    empty = tmp_path / "empty.yaml"
    empty.write_text("[]\n")
    for path, problem in ((latin1, "not UTF-8"), (empty, "the list is empty")):
        for args in (["sources", "validate", str(path)], ["crawl", "--sources", str(path)]):
            result = cli(*args, env=_env(tmp_path))
            out = result.stdout + result.stderr
            # `sources validate` is the check (1); a command given that file: bad input (2)
            code = 1 if args[0] == "sources" else 2
            assert result.returncode == code and problem in out and "Traceback" not in out, out


def _reachable_but_redis(tmp_path: Path, redis_url: str) -> dict[str, str]:
    """PostgreSQL and Elasticsearch fine (this machine's, or embedded), Redis as given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATACRAWL_")}
    return {**env, "STRATACRAWL_REDIS_URL": redis_url, "STRATACRAWL_CONNECT_TIMEOUT_S": "1",
            "STRATACRAWL_STATE_DIR": str(tmp_path / "state")}


@pytest.mark.parametrize("command", [["crawl", "--sources"], ["validate"], ["recover"]])
def test_unreachable_redis_is_one_line_and_exit_3(tmp_path: Path, command: list[str]) -> None:
    """It was a 93-line traceback of the driver and exit 70 (a crash)."""
    sources = str(_sources(tmp_path))
    args = [*command, sources] if command[-1] == "--sources" else command
    env = _reachable_but_redis(tmp_path, f"redis://:{SECRET}@127.0.0.1:1/0")
    result = cli(*args, env={**env, "STRATACRAWL_SOURCES": sources}, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 3, out
    assert "Traceback" not in out and SECRET not in out, out
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Redis at redis://" in errors[0], out


@pytest.mark.parametrize("setting, value", [
    ("STRATACRAWL_REDIS_URL", "foo://127.0.0.1:6379"),
    ("STRATACRAWL_REDIS_URL", "redis://[::1:6379"),
    ("STRATACRAWL_ELASTICSEARCH_URL", "htp:/nohost"),
    ("STRATACRAWL_DATABASE_URL", "mysql://u@h/db"),
])
def test_a_malformed_tier_url_names_its_setting(tmp_path: Path, setting: str,
                                                value: str) -> None:
    env = _reachable_but_redis(tmp_path, "redis://127.0.0.1:1/0")
    result = cli("recover", env={**env, setting: value}, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr  # configuration
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {setting} ") and "malformed" in line, result.stderr
