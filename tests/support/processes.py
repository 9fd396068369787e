"""Helpers shared by tests: running the CLI as users do, finding leftover processes, a
headless browser, staged fetches as the fetcher hands them over."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``stratacrawl ARGS`` in a subprocess (what a user types)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "stratacrawl", *args], env=full_env,
                          cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout)


def processes_under(folder: Path) -> list[str]:
    """Command lines of live processes that mention ``folder`` (our state folder)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (proc / "stat").read_text()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if stat.split(") ", 1)[1].startswith("Z"):
            continue
        if str(folder) in cmd or cwd.startswith(str(folder)):
            found.append(cmd.strip())
    return found


def require_chromium() -> None:
    """Skip without Chromium, except where it is required (CI installs it)."""
    import pytest

    if CHROMIUM is None:
        if os.environ.get("STRATACRAWL_TEST_REQUIRE_CHROMIUM"):
            pytest.fail("Chromium is required here (CI installs Debian's chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")


# With this, every host name fails to resolve: the browser has no network at all.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND"


def _chromium(page: Path | str, profile: Path, *args: str, offline: bool) -> str:
    assert CHROMIUM
    url = page.as_uri() if isinstance(page, Path) else page
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=3000",
         *([OFFLINE] if offline else []), *args, url],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dump_dom(page: Path | str, profile: Path, *, offline: bool = False) -> str:
    """The page's DOM after headless Chromium has loaded it and run its scripts."""
    return _chromium(page, profile, "--dump-dom", offline=offline)


def screenshot(page: Path | str, profile: Path, out: Path, *, offline: bool = False) -> Path:
    """A 1400 by 900 PNG of the page as headless Chromium renders it."""
    _chromium(page, profile, "--window-size=1400,900", f"--screenshot={out}", offline=offline)
    assert out.exists()
    return out


def endpoints_env(endpoints: Any, state_dir: Path) -> dict[str, str]:
    """Environment for a ``stratacrawl`` subprocess on the test's tiers (``Endpoints``)."""
    return {**os.environ, "STRATACRAWL_REDIS_URL": endpoints.redis_url,
            "STRATACRAWL_DATABASE_URL": endpoints.database_url,
            "STRATACRAWL_ELASTICSEARCH_URL": endpoints.elasticsearch_url,
            "STRATACRAWL_ES_PLAIN_JSON": "true", "STRATACRAWL_STATE_DIR": str(state_dir)}


def tier_env(comps: Any, state_dir: Path) -> dict[str, str]:
    """Environment for a ``stratacrawl`` subprocess on the same tiers as ``comps``."""
    return comps.runtime.child_env(state_dir)  # type: ignore[no-any-return]


def staged_fetches(tasks: Any, worker: str = "w1") -> list[Any]:
    """A fetched page per claimed task (``<html>hi</html>``, 200), as the fetcher hands
    them to staging or the spool."""
    from datetime import UTC, datetime

    from stratacrawl.cold.staging import StagedFetch, make_row
    from stratacrawl.cold.tasks import TaskState

    now = datetime.now(UTC)
    return [StagedFetch(
        row=make_row(fetched_at=now, fetch_key=f"{t.id}:1:x", source_id=t.source_id,
                     task_id=t.id, attempt=1, url=t.url, final_url=t.url, status=200,
                     headers={}, content_type="text/html", body=b"<html>hi</html>",
                     elapsed_ms=1.0, trace_id="x", worker=worker, kind="item", success=True),
        outcome=(t.id, TaskState.SUCCEEDED, 200, None, None), url_hash=t.url_hash,
        content_hash="0c" * 16, etag=None, last_modified=None, succeeded=True, fetched_at=now,
        status=200, body_bytes=15) for t in tasks]


@contextlib.contextmanager
def small_disk(folder: Path, size_kb: int = 64) -> Iterator[bool]:
    """A tmpfs of ``size_kb`` mounted on ``folder`` for the block (a disk that fills);
    yields False, mounting nothing, where this machine does not allow ``mount``. Always
    unmounted after."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs",
                              str(folder)], capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to the last byte."""
    with open(folder / "filler", "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
                f.flush()
