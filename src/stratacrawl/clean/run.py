"""One cleaning run, as the CLI, the flow and the demo start it: what is staged cleaned
(in this process or in several), then the format anomalies looked for."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from stratacrawl.clean.anomaly import check_format_anomalies
from stratacrawl.clean.cleaner import Cleaner
from stratacrawl.clean.parallel import CleanChild, CleanJob, CleanTarget, clean_in_processes
from stratacrawl.clean.stats import CleanStats
from stratacrawl.cold.staging import clean_states

log = logging.getLogger(__name__)


@dataclass
class CleanReport:
    stats: CleanStats
    anomalies: list[str]                        # sources whose format errors jumped
    states: dict[str, dict[str, int]]           # per source: item pages by clean state (24 h)


async def clean_staged(cleaner: Cleaner, *, seconds: float | None = None,
                       source_ids: list[str] | None = None, follow: bool = False,
                       processes: int = 1, target: CleanTarget | None = None,
                       child: CleanChild | None = None) -> CleanReport:
    """One cleaning run: clean what is staged (with ``cleaner``, in this process, and with
    ``processes`` = N > 1 in N - 1 more processes running ``child``, connecting to
    ``target``), then look for format anomalies."""
    if processes > 1 and (target is None or child is None):
        raise ValueError("cleaning in several processes needs their connections (target) "
                         "and what they run (child)")
    pool, sources = cleaner.pool, cleaner.sources
    here = cleaner.run(seconds=seconds, source_ids=source_ids, follow=follow)
    if processes > 1 and target is not None and child is not None:
        stats = await clean_in_processes(child, target, processes, CleanJob(
            seconds=seconds, source_ids=tuple(source_ids) if source_ids else None,
            follow=follow, batch_size=cleaner.batch_size), here)
    else:
        stats = await here
    for sid, st in sorted(stats.sources.items()):
        if st.unknown_timezones:
            log.warning("%s: %d date(s) with a time-zone abbreviation not understood, read "
                        "as UTC: %s", sid, sum(st.unknown_timezones.values()),
                        ", ".join(f"{k} {n}" for k, n in st.unknown_timezones.most_common(5)),
                        extra={"source_id": sid})
    ids = source_ids or sources.ids
    return CleanReport(stats, await check_format_anomalies(pool, ids),
                       await clean_states(pool, ids))
