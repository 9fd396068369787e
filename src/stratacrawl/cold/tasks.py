"""Task states and the shapes that move through the frontier."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple


class TaskState(StrEnum):
    """``PENDING → LEASED → SUCCEEDED | FAILED | RETRY_WAIT``; ``RETRY_WAIT → PENDING``;
    ``LEASED → REDUNDANT``. A leased task stays ``LEASED`` while it is fetched: each
    change of ``state`` rewrites the row's index entries (the state is in the ready and
    lease indexes' predicates), so a fetch costs its task two such writes, the claim
    and the outcome. ``FETCHING`` is what earlier versions wrote between the two; rows
    in it are held exactly like ``LEASED`` ones."""

    PENDING = "PENDING"
    LEASED = "LEASED"
    FETCHING = "FETCHING"   # written by earlier versions only; held like LEASED
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    RETRY_WAIT = "RETRY_WAIT"
    REDUNDANT = "REDUNDANT"   # a variant of a URL already queued (a learned URL rule): never fetched


LISTS = ("seed", "list", "sitemap")  # kinds of page that recur (their links change)
LISTS_SQL = ", ".join(f"'{k}'" for k in LISTS)   # the same, for ``kind IN (…)``
URGENT = 10  # priority of urgent submissions: ahead of every scheduled task


@dataclass(frozen=True)
class NewTask:
    """A URL to enqueue; ``url_hash`` is the fingerprint of its canonical form."""

    source_id: str
    url: str
    url_hash: str
    kind: str = "item"          # seed | list | item | sitemap
    priority: int = 5
    due_at: datetime | None = None
    depth: int = 0
    trace_id: str | None = None


@dataclass
class ClaimedTask:
    """A task leased to one worker until ``lease_expires_at``."""

    id: int
    source_id: str
    url: str
    url_hash: str
    kind: str
    priority: int
    attempts: int
    depth: int
    lease_owner: str
    lease_expires_at: datetime
    trace_id: str | None = None
    recrawl_s: float | None = None     # its re-crawl interval (None: never fetched yet)
    content_hash: str | None = None    # of its last fetch, when it recurs


class Outcome(NamedTuple):
    """How a leased task ended. ``due_at`` applies to ``PENDING`` (re-crawl) and ``RETRY_WAIT``;
    ``recrawl_s`` is the recurring task's new interval and ``changed`` whether this fetch
    found its content changed (``None``: not known). A named tuple: spool files hold plain
    tuples of the same shape (the older ones without the last two)."""

    task_id: int
    state: TaskState
    status: int | None = None
    error: str | None = None
    due_at: datetime | None = None
    recrawl_s: float | None = None
    changed: bool | None = None


@dataclass
class Batch:
    """Claimed tasks of one source, fetched serially at the source's pace."""

    source_id: str
    batch_id: str
    tasks: list[ClaimedTask] = field(default_factory=list)
    # The claim took every task of the source that was due: its window had no more, and
    # the ledger none beyond the window (a claim right after would find nothing).
    took_all_due: bool = False
