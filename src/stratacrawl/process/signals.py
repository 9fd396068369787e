"""Stopping on a signal: SIGTERM is handled as SIGINT.

A Prefect cancellation, ``docker stop`` and Kubernetes send SIGTERM; a person at a
terminal sends SIGINT. Either way the first signal asks the running work to stop
(:attr:`StopSignals.event`): a crawl stops claiming, lets its in-flight requests finish
for a bounded time, gives the rest back, lands what it fetched and reports. A second
signal cancels the work at once (its leases then expire as after a crash). Work that
has no graceful stop of its own (``graceful=False``) is cancelled on the first signal,
which runs its ``finally`` blocks: open transactions roll back, servers close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM where no event loop handles it (a command starting up, or printing its
    report): raised like Ctrl-C's ``KeyboardInterrupt`` — ``finally`` blocks run — and
    the command exits 143, never killed outright by the signal (-15). Not a
    ``KeyboardInterrupt``: the command-line framework turns those into exit 130."""


def raise_on_sigterm() -> None:
    """SIGTERM as :class:`Terminated` in this process from now on (the main thread)."""
    def terminated(signum: int, frame: object) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, terminated)


class StopSignals:
    """What the signals asked of the work running in this event loop."""

    def __init__(self, *, graceful: bool = True) -> None:
        self.graceful = graceful
        self.event = asyncio.Event()
        self.signum: int | None = None   # the first signal received

    @property
    def exit_code(self) -> int:
        """``128 + N`` after signal N (130 for SIGINT, 143 for SIGTERM); 0 without one."""
        return 128 + self.signum if self.signum else 0

    def _received(self, signum: int, main: asyncio.Task[object] | None) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        if first and self.graceful:
            log.warning("%s: stopping (in-flight work lands or goes back to the queue; "
                        "send it again to stop at once)", signal.Signals(signum).name)
            self.event.set()
        elif main is not None:
            main.cancel()

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopSignals]:
        """Handle SIGINT and SIGTERM in the running loop for the block (where a loop can:
        the main thread; elsewhere the process keeps the handlers it has)."""
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        previous: dict[int, Any] = {}
        for sig in SIGNALS:
            before = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self._received, sig, main)
            except (RuntimeError, ValueError, NotImplementedError):
                continue   # not the main thread
            previous[sig] = before
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                loop.remove_signal_handler(signum)
                if handler is not None:   # (the loop would leave the default, not it)
                    signal.signal(signum, handler)

    def pass_on(self) -> None:
        """After a graceful stop, the signal once more to the handler the process had
        before (a Prefect flow run's: Prefect then ends the run its own way)."""
        if self.signum is not None:
            signal.raise_signal(self.signum)
