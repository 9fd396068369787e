"""What a cleaning run did, per source: pages, records, format errors by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class SourceCleanStats:
    pages: int = 0
    records: int = 0
    format_errors: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    # dates whose time-zone abbreviation was not understood (read as UTC), by abbreviation
    unknown_timezones: Counter[str] = field(default_factory=Counter)


@dataclass
class CleanStats:
    pages: int = 0
    inserted: int = 0
    updated: int = 0
    replaced: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    sources: dict[str, SourceCleanStats] = field(default_factory=dict)

    @property
    def format_errors(self) -> int:
        return sum(s.format_errors for s in self.sources.values())

    def merge(self, other: CleanStats) -> None:
        self.pages += other.pages
        self.inserted += other.inserted
        self.updated += other.updated
        self.replaced += other.replaced
        self.cache_hits += other.cache_hits
        for sid, s in other.sources.items():
            mine = self.sources.setdefault(sid, SourceCleanStats())
            mine.pages += s.pages
            mine.records += s.records
            mine.format_errors += s.format_errors
            mine.reasons.update(s.reasons)
            mine.unknown_timezones.update(s.unknown_timezones)
