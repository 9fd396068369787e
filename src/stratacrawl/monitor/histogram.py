"""A latency histogram with 2 % wide logarithmic buckets: mergeable across processes
(a JSON dict), quantiles within 2 % of the exact value, a few hundred buckets at most."""

from __future__ import annotations

import math
from collections import Counter

STEP = math.log(1.02)


class LatencyHistogram:
    def __init__(self, buckets: dict[int, int] | None = None) -> None:
        self.buckets: Counter[int] = Counter(buckets or {})
        self.count = sum(self.buckets.values())
        self.total_ms = 0.0

    def add(self, ms: float) -> None:
        self.buckets[int(math.log(max(ms, 0.01)) / STEP)] += 1
        self.count += 1
        self.total_ms += ms

    def merge(self, other: LatencyHistogram) -> None:
        self.buckets.update(other.buckets)
        self.count += other.count
        self.total_ms += other.total_ms

    @property
    def mean_ms(self) -> float | None:
        return self.total_ms / self.count if self.count else None

    def quantile_ms(self, q: float) -> float | None:
        """The upper edge of the bucket holding the ``q`` quantile."""
        if not self.count:
            return None
        rank, seen = q * self.count, 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= rank:
                return math.exp((b + 1) * STEP)
        return math.exp((max(self.buckets) + 1) * STEP)

    def to_json(self) -> dict[str, object]:
        return {"buckets": {str(k): v for k, v in self.buckets.items()},
                "total_ms": round(self.total_ms, 3)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> LatencyHistogram:
        raw = data.get("buckets") or {}
        assert isinstance(raw, dict)
        h = cls({int(k): int(v) for k, v in raw.items()})
        h.total_ms = float(data.get("total_ms") or 0.0)  # type: ignore[arg-type]
        return h
