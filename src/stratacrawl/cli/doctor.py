"""``stratacrawl doctor``: is every tier, Prefect and the sources file usable?"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections.abc import Awaitable, Callable

import httpx
import typer

from stratacrawl.cli.common import console, settings
from stratacrawl.errors import SourcesError, StratacrawlError
from stratacrawl.runtime import Runtime, check_elasticsearch, check_postgres, check_redis
from stratacrawl.services import Services
from stratacrawl.services.embedded import Registry
from stratacrawl.settings import Settings
from stratacrawl.sources import load_sources


def prefect_status(s: Settings) -> str:
    """Where flows will run: a Prefect API server, or the ephemeral in-process one."""
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
    named: list[tuple[str, Callable[[Runtime], Awaitable[str]]]] = [
        ("Redis", check_redis), ("Elasticsearch", check_elasticsearch),
        ("PostgreSQL", check_postgres)]
    results = await asyncio.gather(*(fn(rt) for _, fn in named), return_exceptions=True)
    return [(name, r) for (name, _), r in zip(named, results, strict=True)]


def doctor() -> None:
    """Check each tier, Prefect and the sources file; exit 1 naming whatever failed."""
    s = settings()
    failed: list[str] = []
    t0 = time.monotonic()
    # Configured tiers are checked as they are; unconfigured ones on embedded servers.
    try:
        svc = Services(s)
        endpoints = svc.start()
    except StratacrawlError as e:
        console.print(f"[red]✗[/] embedded servers: {e}")
        raise typer.Exit(1) from None
    try:
        rt = Runtime(s, endpoints)
        for name, result in asyncio.run(_checks(rt)):
            if isinstance(result, BaseException):
                failed.append(name)
                console.print(f"[red]✗[/] {result}")
            else:
                where = "embedded" if name.lower().replace("postgresql", "postgres") \
                    in endpoints.embedded else "configured"
                console.print(f"[green]✓[/] {name}: {result} ({where})")
    finally:
        svc.stop()
    try:
        console.print(f"[green]✓[/] Prefect: {prefect_status(s)}")
    except StratacrawlError as e:
        failed.append("Prefect")
        console.print(f"[red]✗[/] {e}")
    if s.sources.exists() or "STRATACRAWL_SOURCES" in os.environ:
        try:
            parsed = load_sources(s.sources)
            console.print(f"[green]✓[/] sources: {s.sources} ({len(parsed.sources)} sources)")
        except SourcesError as e:
            failed.append("sources")
            for p in e.problems:
                console.print(f"[red]✗[/] {p}")
    else:
        console.print(f"[yellow]-[/] sources: no {s.sources} here (set STRATACRAWL_SOURCES)")
    console.print(f"({time.monotonic() - t0:.1f} s)")
    if failed:
        console.print(f"[red]doctor: failed: {', '.join(failed)}[/]")
        raise typer.Exit(1)
