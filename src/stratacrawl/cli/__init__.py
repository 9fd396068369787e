"""The ``stratacrawl`` command line: the same core calls the Prefect flows make."""

from __future__ import annotations

import sys
import traceback

from stratacrawl.cli.app import app
from stratacrawl.cli.common import EXIT_INTERNAL, EXIT_INTERRUPTED, err

__all__ = ["app", "main"]


def main() -> None:
    """The console entry point: ``app`` with the exit-code convention kept for the errors
    no command handles — Ctrl-C exits 130, a crash (a bug) prints its traceback and exits
    70, so a script can tell it from a failed check (1)."""
    try:
        app(prog_name="stratacrawl")
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except Exception:
        traceback.print_exc()
        err.print("[red]internal error[/] (exit 70): the traceback above is a bug; "
                  "please report it")
        sys.exit(EXIT_INTERNAL)
