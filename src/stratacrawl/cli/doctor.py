"""``stratacrawl doctor``: is every tier, Prefect and the sources file usable?"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from stratacrawl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_TIER,
    JSON,
    console,
    emit_json,
    find_sources,
    settings,
)
from stratacrawl.errors import SourcesError, StratacrawlError

if TYPE_CHECKING:   # (imported where used: `--help` stays quick)
    from stratacrawl.settings import Settings
    from stratacrawl.wiring import Runtime


def prefect_status(s: Settings) -> str:
    """Where flows will run: a Prefect API server, or the ephemeral in-process one."""
    import httpx

    from stratacrawl.services.embedded import Registry

    api = os.environ.get("PREFECT_API_URL")
    running = Registry(s.state_path).alive("prefect-server")
    if not api and running:
        api = running.url
    if api:
        try:
            r = httpx.get(api.rstrip("/") + "/health", timeout=5)
            r.raise_for_status()
        except httpx.HTTPError as e:
            raise StratacrawlError(f"Prefect API at {api}: {e}") from None
        return f"server at {api}"
    if importlib.util.find_spec("prefect") is None:
        raise StratacrawlError("Prefect is not installed")
    return "ephemeral (no server running; `stratacrawl up` starts one)"


async def _checks(rt: Runtime) -> list[tuple[str, str | BaseException]]:
    from stratacrawl.wiring import check_elasticsearch, check_postgres, check_redis

    named: list[tuple[str, Callable[[Runtime], Awaitable[str]]]] = [
        ("Redis", check_redis), ("Elasticsearch", check_elasticsearch),
        ("PostgreSQL", check_postgres)]
    results = await asyncio.gather(*(fn(rt) for _, fn in named), return_exceptions=True)
    return [(name, r) for (name, _), r in zip(named, results, strict=True)]


def doctor(as_json: bool = JSON) -> None:
    """Check each tier, Prefect and the sources file; exit 3 if a tier or Prefect is
    unreachable, 2 if only the sources file is wrong, naming whatever failed."""
    from stratacrawl.sources import load_sources
    from stratacrawl.wiring import runtime_of

    s = settings()
    checks: list[dict[str, object]] = []

    def say(name: str, ok: bool | None, detail: str) -> None:
        """One check: ok, failed, or (None) skipped."""
        checks.append({"check": name, "ok": ok, "detail": detail})
        if not as_json:
            mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]-[/]"}[ok]
            console.print(f"{mark} {escape(detail)}")

    t0 = time.monotonic()
    # Configured tiers are checked as they are; unconfigured ones on embedded servers.
    with contextlib.ExitStack() as up:   # embedded servers started here stop after
        try:
            rt = up.enter_context(runtime_of(s))
        except StratacrawlError as e:
            say("embedded servers", False, f"embedded servers: {e}")
            _finish(checks, t0, as_json)
        for name, result in asyncio.run(_checks(rt)):
            if isinstance(result, BaseException):
                say(name, False, str(result))
            else:
                where = "embedded" if name.lower().replace("postgresql", "postgres") \
                    in rt.endpoints.embedded else "configured"
                say(name, True, f"{name}: {result} ({where})")
    try:
        say("Prefect", True, f"Prefect: {prefect_status(s)}")
    except StratacrawlError as e:
        say("Prefect", False, str(e))
    # the sources file every other command reads: given, here, or the platform's
    found = find_sources(s.sources if "STRATACRAWL_SOURCES" in os.environ else None)
    if found is not None:
        try:
            parsed = load_sources(found)
            say("sources", True, f"sources: {found} ({len(parsed.sources)} sources)")
        except SourcesError as e:
            for p in e.problems:
                say("sources", False, p)
    else:
        say("sources", None, f"sources: none (no {s.sources} in {Path.cwd()}, no platform "
                             "started by `stratacrawl up`; set STRATACRAWL_SOURCES)")
    _finish(checks, t0, as_json)


def _finish(checks: list[dict[str, object]], t0: float, as_json: bool) -> None:
    failed = list(dict.fromkeys(str(c["check"]) for c in checks if c["ok"] is False))
    seconds = round(time.monotonic() - t0, 1)
    if as_json:
        emit_json({"ok": not failed, "failed": failed, "checks": checks, "seconds": seconds})
    else:
        console.print(f"({seconds} s)")
        if failed:
            console.print(f"[red]doctor: failed: {', '.join(failed)}[/]")
    if failed:
        # a tier or Prefect unreachable: 3; only the sources file wrong: 2
        raise typer.Exit(EXIT_TIER if set(failed) - {"sources"} else EXIT_BAD_INPUT)
