"""Whether a crawl did its work, source by source: the one-line reasons a fetch run is
not a success. A run that fetched for five minutes and got no page is not Completed.

A source fails the run when its success rate (pages that answered 2xx or 304) fell below
its ``alerts.success_severe`` threshold (the P1 alert's) over at least
``alerts.min_requests`` fetches, when not one of its fetches succeeded, or when it
fetched nothing while work of it was due and no other run was fetching it either.
"""

from __future__ import annotations

from collections.abc import Collection

from stratacrawl.crawl.report import CrawlReport
from stratacrawl.sources import SourcesFile


def failing_sources(report: CrawlReport, sources: SourcesFile,
                    still_due: Collection[str] = ()) -> list[str]:
    """One line per source that failed the crawl (see the module docstring); ``still_due``:
    the sources with work due when the crawl ended that no run held a lease of."""
    lines = []
    for source in sources.sources:
        stats = report.sources.get(source.id)
        fetched = stats.fetched if stats else 0
        if stats is None or fetched == 0:
            if source.id in still_due:
                lines.append(f"{source.id}: nothing fetched though work was due")
            continue
        ok = stats.ok + stats.not_modified
        rate = ok / fetched
        judged = fetched >= source.alerts.min_requests
        if ok == 0 or (judged and rate < source.alerts.success_severe):
            failed = ", ".join(f"{reason} {n}" for reason, n in stats.reasons.most_common()
                               if not reason.startswith(("http-2", "http-304")))
            lines.append(f"{source.id}: {ok} of {fetched} pages ok ({rate:.0%}, alert below "
                         f"{source.alerts.success_severe:.0%}): {failed}")
    return lines
