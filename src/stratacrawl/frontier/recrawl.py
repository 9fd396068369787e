"""Adaptive re-crawl: when a recurring page (a seed, list page or sitemap, and items of a
source that re-crawls them) is fetched again.

Each recurring task keeps its own interval in the ledger (``tasks.recrawl_s``), starting
at the source's ``cadence``. After each fetch whose change can be told, the interval is
multiplied by ``SHRINK`` if the page changed and by ``GROW`` if it did not, and kept
within ``[min_interval, max_interval]`` (by default half the cadence and a day).
Unchanged: a 304, or a body with the content fingerprint of the last fetch (read from
``url_state`` when the task is claimed; such a list page is not parsed again). Changed:
for an item, a different fingerprint; for a list page, new links when its new body is
discovered (``Ledger.grade_lists``) — a paginated list shifts by one on every new item,
and only the pages that show new links changed for the crawl. A link another page found
first counts as new if it was fetched within ``FRESH_CADENCES`` cadences: the sitemap and
the front page both show a new item, and whichever is read second has not become
redundant. A page that changes at a steady rate settles where a share ``p`` of fetches
find a change with ``p·ln SHRINK + (1 - p)·ln GROW = 0``: p ≈ 0.37, about two fetches per
change at that page's own rate, so a page that changes hourly is fetched about every 28
minutes and one that changes weekly about twice a week (or at ``max_interval``), instead
of both at the cadence. The floor under the cadence is what keeps items found as early as
a fixed cadence finds them: the pages that show most new items are fetched more often than
the cadence, with fetches saved many times over on the pages that rarely change. A fetch
whose change cannot be told (no fingerprint of the last one) leaves the interval as it is;
a list page's first discovery counts as a change.

A source's ``recrawl.daily_budget`` caps its re-fetches per UTC day (first fetches of new
URLs are not counted): a claimed re-fetch past it is given back, due at the next day's
start, never fetched this day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from stratacrawl.cold.tasks import LISTS
from stratacrawl.hot.budget import add_recrawl_asks
from stratacrawl.hot.client import HotRedis
from stratacrawl.sources import Source

SHRINK = 0.5
GROW = 1.5
FRESH_CADENCES = 2.0   # a known link fetched within this many cadences is news on a page


def recurs(source: Source, kind: str) -> bool:
    """Whether a successful fetch of this kind of page is due again later."""
    return kind in LISTS or (kind == "item" and source.recrawl.items)


def changed(previous_hash: str | None, status: int | None, content_hash: str | None
            ) -> bool | None:
    """Whether a fetch found the page changed since the last one (``None``: cannot tell)."""
    if status == 304:
        return False
    if previous_hash is None or content_hash is None:
        return None
    return content_hash != previous_hash


@dataclass(frozen=True)
class Interval:
    """A recurring task's next interval and due time."""

    seconds: float
    due_at: datetime


def next_interval(source: Source, current_s: float | None, change: bool | None,
                  now: datetime) -> Interval:
    """The interval after a successful fetch: the cadence for a fixed-cadence source and
    for a page's first fetch; else the current one shrunk on a change, grown without,
    within ``[min_interval, max_interval]``."""
    if not source.recrawl.adaptive or current_s is None:  # a first fetch: nothing to compare
        cadence = source.cadence_td.total_seconds()
        return Interval(cadence, now + timedelta(seconds=cadence))
    seconds = current_s
    if change is not None:
        seconds *= SHRINK if change else GROW
    seconds = min(max(seconds, source.min_interval_td.total_seconds()),
                  source.max_interval_td.total_seconds())
    return Interval(seconds, now + timedelta(seconds=seconds))


def next_day(now: datetime) -> datetime:
    """The start of the UTC day after ``now``."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


class RecrawlBudget:
    """Each source's re-fetches per UTC day, counted in hot (one counter per source and day,
    shared by every worker)."""

    def __init__(self, *, redis: HotRedis) -> None:
        self.redis = redis

    async def take(self, source: Source, wanted: int, now: datetime | None = None) -> int:
        """How many of ``wanted`` re-fetches the source may still make today."""
        limit = source.recrawl.daily_budget
        if limit is None or wanted == 0:
            return wanted
        day = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%d")
        total = await add_recrawl_asks(self.redis, source.id, day, wanted)
        # the counter counts what was asked for; the grant is what was left before this ask
        return max(0, min(wanted, limit - (total - wanted)))
