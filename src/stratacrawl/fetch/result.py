"""The outcome of fetching one task."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from stratacrawl.fetch.classify import Verdict


@dataclass
class FetchResult:
    url: str
    verdict: Verdict
    fetched_at: datetime
    trace_id: str
    attempt: int = 1
    final_url: str | None = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""                     # decoded
    content_type: str | None = None
    elapsed_ms: float = 0.0
    redirects: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)  # reasons of the level-1 attempts before
    size: int = field(init=False, default=0)  # decoded body bytes (kept after release_body)

    def __post_init__(self) -> None:
        self.size = len(self.body)

    def release_body(self) -> None:
        """Drop the decoded body once it is packed for staging: a batch of 100 pages would
        otherwise hold every page it fetched until its last request."""
        self.body = b""

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    @property
    def last_modified(self) -> str | None:
        return self.headers.get("last-modified")
