"""Shared helpers of the CLI commands."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
import uvloop
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stratacrawl.errors import ConfigError, InvalidURL, ServiceError, StratacrawlError
from stratacrawl.process.signals import StopSignals, Terminated
from stratacrawl.settings import Settings

if TYPE_CHECKING:
    from stratacrawl.sources import SourcesFile

T = TypeVar("T")
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


# Exit codes, the same for every command (README: "Exit codes").
EXIT_OK = 0
EXIT_FAILED = 1       # a check or alert condition failed (validation, doctor, lookup miss)
EXIT_BAD_INPUT = 2    # bad input or configuration (options, sources file, STRATACRAWL_*)
EXIT_TIER = 3         # a tier (Redis, Elasticsearch, PostgreSQL, Prefect) unreachable
EXIT_INTERNAL = 70    # a crash: an error Stratacrawl did not expect (a bug; traceback shown)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def exit_code(e: BaseException) -> int:
    """The exit code an error ends a command with."""
    if isinstance(e, ConfigError | InvalidURL):
        return EXIT_BAD_INPUT
    if isinstance(e, ServiceError):
        return EXIT_TIER
    return EXIT_FAILED if isinstance(e, StratacrawlError) else EXIT_INTERNAL


def settings() -> Settings:
    try:
        return Settings()
    except Exception as e:  # pydantic ValidationError: a broken STRATACRAWL_* variable
        errors = getattr(e, "errors", None)
        lines = [f"{'.'.join(map(str, x['loc'])) or 'environment'}: "
                 f"{x['msg'].removeprefix('Value error, ')}" for x in errors()] if errors else [str(e)]
        for line in lines:
            err.print(f"[red]error:[/] bad STRATACRAWL_* setting: {escape(line)}")
        sys.exit(EXIT_BAD_INPUT)


def fail(e: StratacrawlError | str, code: int | None = None) -> NoReturn:
    """Print the error (user text escaped: '[a-z]' in a message is not Rich markup) and
    exit with ``code``, by default the error's own (:func:`exit_code`; 1 for a string)."""
    err.print("[red]error:[/] " + escape(str(e)))
    sys.exit(code if code is not None else exit_code(e) if isinstance(e, BaseException)
             else EXIT_FAILED)


def bad_input(message: str) -> NoReturn:
    """A wrong option or argument: the message, exit 2."""
    fail(message, EXIT_BAD_INPUT)


def run(coro: Coroutine[Any, Any, T], signals: StopSignals | None = None) -> T:
    """Run a command's coroutine on uvloop; a Stratacrawl error ends the command with its
    message and its exit code. SIGINT and SIGTERM alike cancel it (its ``finally`` blocks
    run: transactions roll back, servers close) and end it quietly with 128 + the
    signal's number (130, 143) — or, with a graceful ``signals`` (whose event the
    coroutine watches), the first one only asks it to stop and it returns; the second
    cancels it."""
    signals = signals or StopSignals(graceful=False)

    async def main() -> T:
        with signals.installed():
            return await coro

    try:
        return uvloop.run(main())
    except StratacrawlError as e:
        fail(e)
    except Terminated:
        sys.exit(signals.exit_code or EXIT_TERMINATED)
    except (KeyboardInterrupt, asyncio.CancelledError):
        sys.exit(signals.exit_code or EXIT_INTERRUPTED)


JSON = typer.Option(False, "--json", help="The report as one JSON document on standard output.")
SOURCES = typer.Option(None, "--sources", envvar="STRATACRAWL_SOURCES",
                       help="The sources file (default: sources.yaml here, else the one the "
                            "platform of `stratacrawl up` runs).")


def find_sources(given: Path | None) -> Path | None:
    """The sources file a command reads: ``given`` (``--sources`` or
    ``STRATACRAWL_SOURCES``), else ``sources.yaml`` in the working directory, else the
    one the platform started by ``stratacrawl up`` runs (named on standard error); None
    when there is none."""
    if given is not None:
        return given
    here = Path("sources.yaml")
    if here.exists():
        return here
    from stratacrawl.stack import platform_record

    platform = (platform_record(settings().state_path) or {}).get("sources")
    if platform and Path(platform).exists():
        err.print(f"sources file: {escape(platform)} (the platform's: stratacrawl up)")
        return Path(platform)
    return None


def load_sources_file(given: Path | None, only: str | None = None) -> SourcesFile:
    """The sources file of :func:`sources_path`, parsed; a file with problems ends the
    command with them, a source ``only`` that it lacks is bad input."""
    from stratacrawl.sources import load_sources

    try:
        parsed = load_sources(sources_path(given))
        if only is not None:
            parsed.get(only)
        return parsed
    except KeyError as e:
        bad_input(str(e).strip('"'))
    except StratacrawlError as e:
        fail(e)


def sources_path(given: Path | None) -> Path:
    """:func:`find_sources`, or bad input naming where it looked."""
    found = find_sources(given)
    if found is None:
        bad_input(f"no sources file: none given (--sources or STRATACRAWL_SOURCES), no "
                  f"sources.yaml in {Path.cwd()}, and no platform started by `stratacrawl "
                  f"up` with state in {settings().state_path}")
    return found


URL_WIDTH = 40   # a URL in a table: shortened in the middle to this, host and last segment kept


def short_url(url: str, width: int = URL_WIDTH) -> str:
    """``url`` shortened in its middle to at most ``width`` characters where it can be,
    keeping what tells URLs apart in a table: the host and the last path segment with the
    query (``http://127.0.0.1:8001/…/article/12?ref=3``). Rich would cut the end off, to
    a few characters in 80 columns."""
    if len(url) <= width:
        return url
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    head = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    tail = parts.path.rstrip("/").rsplit("/", 1)[-1] + (f"?{parts.query}" if parts.query else "")
    short = f"{head}/…/{tail}"
    return short if len(short) < len(url) else url


def wrap_at(text: str, width: int, breaks: str = "/ ") -> str:
    """``text`` folded into lines of at most ``width`` characters, broken after one of
    ``breaks`` where it can be (a URL after a "/"), inside a run only when a run is
    longer than a line."""
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for ch in para:
            line += ch
            if len(line) > width:
                cut = max(line.rfind(b, 0, width) for b in breaks) + 1 or width
                lines.append(line[:cut])
                line = line[cut:]
        lines.append(line)
    return "\n".join(lines)


def fitted_table(title: str, headers: list[str], rows: list[list[str]], *, elastic: int,
                 width: int | None = None, droppable: tuple[int, ...] = ()) -> Table:
    """A table that reads in ``width`` columns (the terminal's): every column but
    ``elastic`` as wide as its header and values, never broken inside a word (a value
    longer than ``CELL_MAX`` is cut with "…"); ``elastic`` gets the rest, its URLs
    shortened in the middle only when they do not fit and then wrapped after a "/". Where
    even that leaves ``elastic`` under ``ELASTIC_MIN``, the ``droppable`` columns go
    (last first)."""
    width = width or console.width
    keep = list(range(len(headers)))

    def natural(i: int) -> int:
        return min(CELL_MAX, max(len(part) for cell in [headers[i], *(r[i] for r in rows)]
                                 for part in cell.split("\n")))

    def room() -> int:   # what the elastic column gets: borders 1 + 3 per column
        return width - 1 - 3 * len(keep) - sum(natural(i) for i in keep if i != elastic)

    for i in reversed(droppable):
        if room() >= ELASTIC_MIN:
            break
        keep.remove(i)
    space = max(ELASTIC_MIN, room())
    table = Table(title=title)
    for i in keep:
        if i == elastic:
            table.add_column(headers[i], width=space, overflow="fold")
        else:
            table.add_column(headers[i], no_wrap=True, overflow="ellipsis", width=natural(i))
    for r in rows:
        table.add_row(*(wrap_at("\n".join(short_url(u, space) if "://" in u else u
                                          for u in r[i].split("\n")), space)
                        if i == elastic else r[i] for i in keep))
    return table


CELL_MAX = 24      # a fitted table's other columns: longer values are cut with "…"
ELASTIC_MIN = 16


def emit_json(data: Any) -> None:
    """A command's ``--json`` report: one JSON document on standard output."""
    print(json.dumps(data, default=_json_default, ensure_ascii=False), flush=True)


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    return str(value)  # dates, datetimes, paths, UUIDs, Decimals
