"""What one crawl did: per-source fetch figures, discovery, the staging writer, the spool,
demotion, latency, throttled sources — live while the crawl runs, as JSON at its end."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from stratacrawl.fetch.recording import SourceStats
from stratacrawl.frontier.discovery import DiscoveryStats
from stratacrawl.monitor.histogram import LatencyHistogram
from stratacrawl.staging.loader import DrainReport
from stratacrawl.staging.writer import WriterStats


@dataclass
class CrawlReport:
    seconds: float = 0.0
    discovery: DiscoveryStats = field(default_factory=DiscoveryStats)
    sources: dict[str, SourceStats] = field(default_factory=dict)
    writer: WriterStats | None = None
    spool: DrainReport | None = None
    demoted: int = 0          # URL states indexed in warm during the run
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)  # every request
    # list pages: end of the fetch → their links in the frontier
    hops: LatencyHistogram = field(default_factory=LatencyHistogram)
    tail_s: float | None = None   # from the run's last fetch to its end
    in_flight: dict[str, str] = field(default_factory=dict)  # the worker's requests: slot → source
    # sources 429s slowed down: id -> (effective rate, seconds still held by Retry-After)
    throttled: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """What one crawl did, as JSON (``crawl --json``; the load test merges workers)."""
        reasons: Counter[str] = Counter()
        retries: Counter[str] = Counter()
        for st in self.sources.values():
            reasons.update(st.reasons)
            retries.update(st.retries)
        return {"seconds": round(self.seconds, 3), "fetched": self.fetched,
                "tail_s": None if self.tail_s is None else round(self.tail_s, 3),
                "ok": sum(s.ok for s in self.sources.values()),
                "not_modified": sum(s.not_modified for s in self.sources.values()),
                "failed": sum(s.failed for s in self.sources.values()),
                "landed": self.writer.landed if self.writer else 0,
                "lost_leases": self.writer.lost_leases if self.writer else 0,
                "spooled": self.writer.spooled if self.writer else 0,
                "flushes": self.writer.flushes if self.writer else 0,
                "flush_seconds": round(self.writer.flush_seconds, 3) if self.writer else 0.0,
                "queued": self.discovery.queued, "demoted": self.demoted,
                "redundant": sum(s.redundant for s in self.sources.values()),
                "held_variants": sum(s.held for s in self.sources.values()),
                "over_budget": sum(s.over_budget for s in self.sources.values()),
                "reasons": dict(reasons), "retries": dict(retries),
                "throttled": {k: {"rate": round(r, 3), "held_s": round(h, 1)}
                              for k, (r, h) in self.throttled.items()},
                "spool_drained": self.spool.rows if self.spool else 0,
                "spool_damaged": [asdict(d) for d in self.spool.damaged] if self.spool else [],
                "latency": self.latency.to_json(), "list_hops": self.hops.to_json()}

    @property
    def fetched(self) -> int:
        return sum(s.fetched for s in self.sources.values())
