"""The ``stratacrawl`` command line: the same core calls the Prefect flows make."""

from __future__ import annotations

import signal
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
    from stratacrawl.signals import Terminated, raise_on_sigterm

    raise_on_sigterm()   # (first: a SIGTERM while the commands import ends cleanly too)
    try:
        _run_command()
    except Terminated:   # SIGTERM 143, Ctrl-C 130: a graceful stop's codes
        sys.exit(128 + 15)
    except KeyboardInterrupt:
        sys.exit(128 + 2)
    finally:
        # The command's work and exit code are settled. Python's shutdown then puts the
        # default disposition back for signals it handles before it frees its modules (a
        # second or more with Great Expectations loaded), and a SIGTERM then killed the
        # process (-15) instead of letting it exit with its code. An ignored signal is
        # left as it is.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _run_command() -> None:
    from stratacrawl.cli.app import command
    from stratacrawl.cli.common import EXIT_INTERNAL, err

    try:
        command()(prog_name="stratacrawl")
    except Exception:
        traceback.print_exc()
        err.print("[red]internal error[/] (exit 70): the traceback above is a bug; "
                  "please report it")
        sys.exit(EXIT_INTERNAL)
