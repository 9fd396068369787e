"""The ``stratacrawl`` command line: the same core calls the Prefect flows make."""

from __future__ import annotations

import atexit
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
    from stratacrawl.process.signals import Terminated, raise_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    raise_on_sigterm()   # (first: a SIGTERM while the commands import ends cleanly too)
    # Python's shutdown puts the default disposition back for the signals it handles
    # before it frees its modules (a second or more with Great Expectations loaded): a
    # SIGTERM then killed the process (-15) instead of letting it exit with the code it
    # had settled. At shutdown the signal is ignored (an ignored signal is left as it is).
    atexit.register(signal.signal, signal.SIGTERM, signal.SIG_IGN)
    try:
        _run_command()
    except Terminated:   # SIGTERM 143, Ctrl-C 130: a graceful stop's codes
        sys.exit(128 + 15)
    except KeyboardInterrupt:
        sys.exit(128 + 2)
    finally:   # a caller in this process (a test) gets its own handler back
        signal.signal(signal.SIGTERM, before)


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
