"""Progress of a running crawl as JSON lines on stdout: one a second, then the report.

``stratacrawl crawl --json`` and the ``fetch`` flow (``json_lines=True``) print the same
lines, so the load test reads a worker the same way whether it is a plain process or a
Prefect flow run (whose stdout its Prefect worker passes through).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stratacrawl.crawl import CrawlReport


async def every(seconds: float, tick: Callable[[float], None]) -> None:
    """``tick(lag)`` every ``seconds``; ``lag``: how late the event loop woke it (a busy
    loop delays every request's send and receive by as much)."""
    while True:
        due = time.monotonic() + seconds
        await asyncio.sleep(seconds)
        tick(time.monotonic() - due)


def emit(line: dict[str, Any]) -> None:
    """One JSON line on the real stdout (not through a logger that reformats it)."""
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def with_json_progress(run: Coroutine[Any, Any, CrawlReport],
                             report: CrawlReport) -> CrawlReport:
    """Await ``run``, printing a progress line every second and the final report."""
    t0 = time.monotonic()

    def line(lag_s: float) -> None:
        w = report.writer
        emit({"t": round(time.monotonic() - t0, 2), "fetched": report.fetched,
              "landed": w.landed if w else 0, "spooled": w.spooled if w else 0,
              "queued": report.discovery.queued, "in_flight": len(report.in_flight),
              "loop_lag_ms": round(lag_s * 1000, 1),
              "throttled": {k: {"rate": round(r, 3), "held_s": round(h, 1)}
                            for k, (r, h) in report.throttled.items()}})

    ticker = asyncio.create_task(every(1.0, line))
    try:
        done = await run
    finally:
        ticker.cancel()
    emit({"final": True, **done.to_json()})
    return done
