"""Live fetch counters and request traces in the hot tier, written once per batch.

Counters are per source and per minute, ``sc:m:{source}:<minute>`` (a hash: requests,
ok, failed, retries, latency sum and a latency histogram), kept two hours: enough for
5-minute rates against a one-hour baseline, and bounded. The trace is the last 100
requests per source, ``sc:{source}:trace`` (a capped list of JSON lines).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from stratacrawl.hot import keys as hot_keys
from stratacrawl.hot.client import HotRedis


class _Verdict(Protocol):
    @property
    def success(self) -> bool: ...
    @property
    def reason(self) -> str: ...


class Request(Protocol):
    """What a batch's request tells the live counters (a fetch result; monitoring does
    not depend on the fetcher)."""

    @property
    def verdict(self) -> _Verdict: ...
    @property
    def attempt(self) -> int: ...
    @property
    def elapsed_ms(self) -> float: ...
    @property
    def fetched_at(self) -> datetime: ...
    @property
    def url(self) -> str: ...
    @property
    def status(self) -> int | None: ...
    @property
    def size(self) -> int: ...
    @property
    def trace_id(self) -> str: ...


BUCKETS_MS = (50, 100, 250, 500, 1000, 2000, 3500, 5000, 10000, 30000)
KEEP_S = 7200
TRACE_LEN = 100


minute_key = hot_keys.minute_counters
trace_key = hot_keys.trace


def _bucket(ms: float) -> str:
    for b in BUCKETS_MS:
        if ms <= b:
            return f"le{b}"
    return "inf"


@dataclass
class Window:
    """Counters summed over some minutes."""

    requests: int = 0
    ok: int = 0
    failed: int = 0
    retries: int = 0
    latency_ms_sum: float = 0.0
    histogram: dict[str, int] = field(default_factory=dict)

    @property
    def success_rate(self) -> float | None:
        return self.ok / self.requests if self.requests else None

    @property
    def retry_ratio(self) -> float | None:
        return self.retries / self.requests if self.requests else None

    @property
    def mean_ms(self) -> float | None:
        return self.latency_ms_sum / self.requests if self.requests else None

    def quantile_ms(self, q: float) -> float | None:
        """Upper bound of the histogram bucket holding the ``q`` quantile."""
        if not self.requests:
            return None
        rank, seen = q * self.requests, 0
        for b in BUCKETS_MS:
            seen += self.histogram.get(f"le{b}", 0)
            if seen >= rank:
                return float(b)
        return float("inf")

    def add(self, raw: dict[bytes | str, bytes | str]) -> None:
        for k, v in raw.items():
            name = k.decode() if isinstance(k, bytes) else k
            value = float(v)
            if name == "requests":
                self.requests += int(value)
            elif name == "ok":
                self.ok += int(value)
            elif name == "failed":
                self.failed += int(value)
            elif name == "retries":
                self.retries += int(value)
            elif name == "lat_ms":
                self.latency_ms_sum += value
            else:
                self.histogram[name] = self.histogram.get(name, 0) + int(value)


class LiveMetrics:
    """Writes (per batch) and reads (per window) the live counters and traces."""

    def __init__(self, *, redis: HotRedis) -> None:
        self.redis = redis

    async def record_batch(self, source_id: str, worker: str,
                           results: Sequence[tuple[str, Request]]) -> None:
        """One pipeline for a whole batch: counters, histogram, trace lines."""
        if not results:
            return
        minute = int(time.time() // 60)
        key = minute_key(source_id, minute)
        counts: dict[str, float] = {}
        lines = []
        for url_hash, r in results:
            counts["requests"] = counts.get("requests", 0) + 1
            counts["ok" if r.verdict.success else "failed"] = counts.get(
                "ok" if r.verdict.success else "failed", 0) + 1
            counts["retries"] = counts.get("retries", 0) + (r.attempt - 1)
            counts["lat_ms"] = counts.get("lat_ms", 0.0) + r.elapsed_ms
            b = _bucket(r.elapsed_ms)
            counts[b] = counts.get(b, 0) + 1
            lines.append(json.dumps({
                "at": r.fetched_at.isoformat(), "url": r.url, "url_hash": url_hash,
                "status": r.status, "ms": round(r.elapsed_ms, 1), "bytes": r.size,
                "error": None if r.verdict.success else r.verdict.reason, "worker": worker,
                "trace_id": r.trace_id}))
        async with self.redis.pipeline(transaction=False) as pipe:
            for field_name, value in counts.items():
                if field_name == "lat_ms":
                    pipe.hincrbyfloat(key, field_name, value)
                else:
                    pipe.hincrby(key, field_name, int(value))
            pipe.expire(key, KEEP_S)
            pipe.lpush(trace_key(source_id), *lines)   # the batch's newest ends up first
            pipe.ltrim(trace_key(source_id), 0, TRACE_LEN - 1)
            await pipe.execute()

    async def window(self, source_id: str, minutes: int, *, end_offset: int = 0,
                     now: float | None = None) -> Window:
        """Counters of the last ``minutes`` minutes (ending ``end_offset`` minutes before
        ``now``, default the current time)."""
        now = int((now or time.time()) // 60) - end_offset
        async with self.redis.pipeline(transaction=False) as pipe:
            for m in range(now - minutes + 1, now + 1):
                pipe.hgetall(minute_key(source_id, m))
            rows = await pipe.execute()
        w = Window()
        for raw in rows:
            w.add(raw)
        return w

    async def minutes(self, source_ids: Sequence[str], count: int,
                      now: float | None = None) -> dict[str, list[tuple[int, Window]]]:
        """Per source, the last ``count`` minutes up to ``now``, the current one so far
        (epoch minute, counters), oldest first; minutes with no request are left out."""
        last = int((now or time.time()) // 60)
        span = range(last - count + 1, last + 1)
        async with self.redis.pipeline(transaction=False) as pipe:
            for sid in source_ids:
                for m in span:
                    pipe.hgetall(minute_key(sid, m))
            rows = iter(await pipe.execute())
        out: dict[str, list[tuple[int, Window]]] = {}
        for sid in source_ids:
            out[sid] = []
            for m in span:
                raw = next(rows)
                if raw:
                    w = Window()
                    w.add(raw)
                    out[sid].append((m, w))
        return out

    async def trace(self, source_id: str, n: int = TRACE_LEN) -> list[dict[str, object]]:
        """The last ``n`` requests, newest first (batches record their requests when they
        end, so the list is put in time order here)."""
        raw = await self.redis.lrange(trace_key(source_id), 0, n - 1)
        return sorted((json.loads(x) for x in raw), key=lambda t: str(t["at"]), reverse=True)
