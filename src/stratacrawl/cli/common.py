"""Shared helpers of the CLI commands."""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from typing import Any, NoReturn, TypeVar

import uvloop
from rich.console import Console
from rich.markup import escape

from stratacrawl.errors import StratacrawlError
from stratacrawl.settings import Settings

T = TypeVar("T")
console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def settings() -> Settings:
    try:
        return Settings()
    except Exception as e:  # pydantic ValidationError: a broken STRATACRAWL_* variable
        err.print(f"[red]error:[/] bad STRATACRAWL_* setting: {e}")
        sys.exit(2)


def fail(e: StratacrawlError | str, code: int = 1) -> NoReturn:
    err.print("[red]error:[/] " + escape(str(e)))  # '[a-z]' in a message is not markup
    sys.exit(code)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine on uvloop; a Stratacrawl error ends the command with its
    message (exit 1), Ctrl-C quietly (exit 130)."""
    try:
        return uvloop.run(coro)
    except StratacrawlError as e:
        fail(e)
        raise
    except KeyboardInterrupt:
        sys.exit(130)
