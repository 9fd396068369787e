"""The ``stratacrawl`` command line: the same core calls the Prefect flows make."""

from __future__ import annotations

import sys
import traceback

__all__ = ["main"]


def main() -> None:
    """The console entry point: ``app`` with the exit-code convention kept for the errors
    no command handles — Ctrl-C exits 130, a crash (a bug) prints its traceback and exits
    70, so a script can tell it from a failed check (1).

    The commands are imported here, not with this module: a process spawned by a command
    (a cleaner of ``clean --processes``) re-reads the console script, which imports only
    this module; the commands and all they import would cost it ~2 s of CPU."""
    from stratacrawl.cli.app import command
    from stratacrawl.cli.common import EXIT_INTERNAL, EXIT_INTERRUPTED, err

    try:
        command()(prog_name="stratacrawl")
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except Exception:
        traceback.print_exc()
        err.print("[red]internal error[/] (exit 70): the traceback above is a bug; "
                  "please report it")
        sys.exit(EXIT_INTERNAL)
