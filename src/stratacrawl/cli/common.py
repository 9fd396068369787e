"""Shared helpers of the CLI commands."""

from __future__ import annotations

import sys

from rich.console import Console

from stratacrawl.errors import StratacrawlError
from stratacrawl.settings import Settings

console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def settings() -> Settings:
    try:
        return Settings()
    except Exception as e:  # pydantic ValidationError: a broken STRATACRAWL_* variable
        err.print(f"[red]error:[/] bad STRATACRAWL_* setting: {e}")
        sys.exit(2)


def fail(e: StratacrawlError | str, code: int = 1) -> None:
    err.print(f"[red]error:[/] {e}")
    sys.exit(code)
