"""One exit-code convention for every command: 0 ok, 1 a check failed, 2 bad input or
configuration, 3 a tier unreachable, 70 a crash, 130 interrupted."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

import stratacrawl.cli as cli_module
from stratacrawl.cli.common import bad_input, exit_code, fail
from stratacrawl.errors import (
    ConfigError,
    InvalidURL,
    ServiceStartError,
    ServiceUnavailable,
    SourcesError,
    ValidationFailed,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("error", "code"), [
    (ConfigError("bad setting"), 2),
    (SourcesError("sources.yaml", ["x: unknown key"]), 2),
    (InvalidURL("not a url", "relative"), 2),
    (ServiceUnavailable("PostgreSQL", "postgresql://h/db", "connection refused"), 3),
    (ServiceStartError("Redis", None, "no redis-server"), 3),
    (ValidationFailed(["news-1 2026-11-30: count"]), 1),
    (RuntimeError("a bug"), 70),
])
def test_each_kind_of_error_has_its_exit_code(error: BaseException, code: int) -> None:
    assert exit_code(error) == code


def test_fail_exits_with_the_errors_code_and_prints_brackets_as_text(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        fail(ConfigError("pattern [a-z0-9_-]+ is wrong"))
    assert exc.value.code == 2
    assert "pattern [a-z0-9_-]+ is wrong" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        bad_input("--day: not a day [2026-13-01]")
    assert exc.value.code == 2
    assert "[2026-13-01]" in capsys.readouterr().err


def test_a_crash_exits_70_with_its_traceback_and_ctrl_c_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def crash(**_: object) -> None:
        raise ZeroDivisionError("division by zero")

    commands = importlib.import_module("stratacrawl.cli.app")
    monkeypatch.setattr(commands, "command", lambda: crash)
    with pytest.raises(SystemExit) as exc:
        cli_module.main()
    assert exc.value.code == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError" in err and "internal error" in err

    def interrupted(**_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "command", lambda: interrupted)
    with pytest.raises(SystemExit) as exc:
        cli_module.main()
    assert exc.value.code == 130


@pytest.mark.parametrize("url", ["postgresql://u:PgSecret%PW1@127.0.0.1:5432/db",
                                 "postgresql://u:PgSecretPW1@127.0.0.1:1/db",
                                 "host=127.0.0.1 port=1 user=u password=PgSecretPW1 dbname=db"])
def test_a_database_url_never_prints_its_password(url: str, tmp_path: Path) -> None:
    """A malformed URL printed its password in the parser's error ("invalid
    percent-encoded token"); an unreachable one must not either."""
    from tests.support.processes import cli

    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATACRAWL_")}
    env.update(STRATACRAWL_DATABASE_URL=url, STRATACRAWL_STATE_DIR=str(tmp_path),
               STRATACRAWL_CONNECT_TIMEOUT_S="2")
    done = cli("recover", env=env, timeout=120)
    assert done.returncode in (2, 3), done.stdout + done.stderr
    assert "PgSecret" not in done.stdout + done.stderr, done.stderr
