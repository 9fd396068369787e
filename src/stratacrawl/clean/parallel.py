"""Cleaning on several cores: cleaner processes, each with its own PostgreSQL pool and
Redis client, claiming staged pages by ``SKIP LOCKED`` as a single cleaner does — so they
never clean the same page, and stopping one loses nothing (its open transaction rolls
back and the pages are claimed again).

Extraction is CPU-bound Python (lexbor, trafilatura): one process cleans at one core's
speed, and a busy crawler host needs the others. The processes are spawned (not forked:
the parent holds an event loop and open sockets) and report their figures back. The
calling process cleans too, as one of them: it starts at once, while the spawned ones
spend their first second or two importing.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from stratacrawl.clean.stats import CleanStats


@dataclass(frozen=True)
class CleanTarget:
    """What a cleaner process needs to open connections of its own."""

    database_url: str
    redis_url: str | None
    redis_cluster: bool
    sources_path: str
    connect_timeout_s: float = 10.0


@dataclass(frozen=True)
class CleanJob:
    seconds: float | None = None
    source_ids: tuple[str, ...] | None = None
    follow: bool = False
    batch_size: int = 200


# What a spawned cleaner process runs (``stratacrawl.build.clean_in_child``).
CleanChild = Callable[[CleanTarget, CleanJob], CleanStats]


def default_processes(cpus: int | None = None) -> int:
    """One cleaner per core but one (left to the fetch worker of the host), at least one."""
    return max(1, (cpus or os.cpu_count() or 1) - 1)


@contextlib.contextmanager
def main_module_left_out() -> Iterator[None]:
    """Processes spawned in the block do not run this process's main module again.

    A spawned child re-imports its parent's ``__main__`` (by module name under ``python -m``)
    before it unpickles its work. Under a Prefect process worker that module is Prefect's
    engine, which a cleaner does not use: +70 MB of RSS and ~0.8 s of CPU per child per
    flow run. Cleaner children need only the module of the function they run, so the block
    hides the main module's name and path from ``multiprocessing``'s start-up data (read
    when a child starts) and puts them back after."""
    main = sys.modules["__main__"]
    spec, path = getattr(main, "__spec__", None), main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__spec__ = spec
        if path is not None:
            main.__file__ = path


PARENT_CHECK_S = 0.5
EXIT_ORPHANED = 143   # as if SIGTERM had reached it


def die_with_parent(parent: int) -> None:
    """Run in a spawned child first: the child ends when ``parent`` does, however it dies
    (kill -9 included: no signal handler of the parent's runs then). A daemon thread
    watches the child's parent id, which changes when the parent is gone (the child is
    re-parented); the child then exits at once. Its open transaction rolls back, and
    what it had claimed is claimed again by the next cleaner. Without this, a cleaner
    outlived a killed ``clean --processes 2``, cleaning on, then waiting forever on the
    dead parent's pipe."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(EXIT_ORPHANED)

    if os.getppid() != parent:   # gone before this child got here
        os._exit(EXIT_ORPHANED)
    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


async def clean_in_processes(child: CleanChild, target: CleanTarget, processes: int,
                             job: CleanJob, here: Awaitable[CleanStats]) -> CleanStats:
    """Run ``processes`` - 1 cleaner processes beside ``here`` (this process's own
    cleaner, running ``job`` too) until each finds nothing left (or ``job``'s time is
    up); their figures merged (``seconds``: the whole run's). Each process runs
    ``child(target, job)``: a module-level function (it is pickled by name), which builds
    the process's cleaner with connections of its own to ``target``."""
    loop = asyncio.get_running_loop()
    total = CleanStats()
    t0 = loop.time()
    spawned = processes - 1
    ex = ProcessPoolExecutor(spawned, mp_context=multiprocessing.get_context("spawn"),
                             initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        with main_module_left_out():   # the processes start on these submits
            children = [loop.run_in_executor(ex, child, target, job)
                        for _ in range(spawned)]
        for stats in await asyncio.gather(here, *children):
            total.merge(stats)
    except BaseException:
        # Stopped (a signal cancels the command) or failed: the children stop too, now
        # (their transactions roll back; what they held is claimed again).
        # (ProcessPoolExecutor has no public way to end its workers before Python 3.14.)
        for proc in list(getattr(ex, "_processes", {}).values()):
            proc.terminate()
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    total.seconds = loop.time() - t0
    return total
