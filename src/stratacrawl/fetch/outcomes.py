"""What a fetch means for its task: the ledger outcome by the retry rules (the kind of
answer is ``fetch/classify.py``'s), and for a page that recurs, its next re-crawl
(``frontier/recrawl.py``). A list page whose body changed has changed for the crawl only
if it shows news (a paginated list shifts on every new item): known at once when the
list hop discovered its links (``news``), else graded when the discovery loop does
(``Ledger.grade_lists``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from stratacrawl.cold.tasks import LISTS, ClaimedTask, Outcome, TaskState
from stratacrawl.fetch.classify import Kind
from stratacrawl.fetch.result import FetchResult
from stratacrawl.frontier.frontier import LEVEL2_DELAY
from stratacrawl.frontier.recrawl import changed, next_interval, recurs
from stratacrawl.sources import Source

MAX_ATTEMPTS = 5


def outcome_for(task: ClaimedTask, result: FetchResult, source: Source, level2: bool,
                now: datetime, content_hash: str | None = None,
                news: bool | None = None) -> Outcome:
    """The task's outcome; ``level2``: its batch mostly failed (a transient failure then
    waits ``LEVEL2_DELAY``); ``content_hash``: of this fetch's body; ``news``: whether
    a list page's links, discovered already, showed news (None: not discovered yet)."""
    v = result.verdict
    if v.success:
        if recurs(source, task.kind):
            change = changed(task.content_hash, result.status, content_hash)
            if change and task.kind in LISTS and source.recrawl.adaptive:
                change = news   # a new list body: whether it has news (None: grade later)
            nxt = next_interval(source, task.recrawl_s, change, now)
            return Outcome(task.id, TaskState.PENDING, result.status, None, nxt.due_at,
                           nxt.seconds, change)
        return Outcome(task.id, TaskState.SUCCEEDED, result.status)
    if v.kind is Kind.RATE_LIMITED:
        return Outcome(task.id, TaskState.RETRY_WAIT, result.status, v.reason,
                       now + timedelta(seconds=v.retry_after_s or 60))
    if v.kind is Kind.TRANSIENT and task.attempts < MAX_ATTEMPTS:
        wait = LEVEL2_DELAY if level2 else timedelta(seconds=30 * task.attempts)
        return Outcome(task.id, TaskState.RETRY_WAIT, result.status, v.reason, now + wait)
    return Outcome(task.id, TaskState.FAILED, result.status, v.reason)
