"""Live fetch counters and request traces in the hot tier.

Counters are per source and per minute, ``sc:m:{source}:<minute>`` (a hash: requests,
ok, failed, retries, latency sum and a latency histogram), kept two hours: enough for
5-minute rates against a one-hour baseline, and bounded. The trace is the last 100
requests per source, ``sc:{source}:trace`` (a capped list of JSON lines).

A fetch worker adds each batch's requests to its own buffer and sends the buffer every
``FLUSH_S`` in one pipeline for all sources, not one pipeline a batch: on a site where a
batch is one list page (the chain at the end of an archive) the per-batch pipeline was
ten Redis commands a page. The live view lags the fetches by up to ``FLUSH_S``, and a
killed process loses at most that much of its counters (they are monitoring, not data:
the ledger and staging hold what was fetched).
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
    @property
    def final_url(self) -> str | None: ...
    @property
    def redirects(self) -> list[str]: ...


FLUSH_S = 1.0
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
    """Writes the live counters and traces: buffered per process, sent by ``flush`` (one
    per process, built by the composition root). Readers use the functions below."""

    def __init__(self, *, redis: HotRedis) -> None:
        self.redis = redis
        self._counts: dict[tuple[str, int], dict[str, float]] = {}   # (source, minute)
        self._lines: dict[str, list[dict[str, object]]] = {}           # source → oldest first
        self._flushed = time.monotonic()

    def record_batch(self, source_id: str, worker: str,
                     results: Sequence[tuple[str, Request]]) -> None:
        """Add a batch's requests to the buffer (sent by the next ``flush``)."""
        if not results:
            return
        counts = self._counts.setdefault((source_id, int(time.time() // 60)), {})
        lines = self._lines.setdefault(source_id, [])
        for url_hash, r in results:
            ok = r.verdict.success
            counts["requests"] = counts.get("requests", 0) + 1
            counts["ok" if ok else "failed"] = counts.get("ok" if ok else "failed", 0) + 1
            counts["retries"] = counts.get("retries", 0) + (r.attempt - 1)
            counts["lat_ms"] = counts.get("lat_ms", 0.0) + r.elapsed_ms
            b = _bucket(r.elapsed_ms)
            counts[b] = counts.get(b, 0) + 1
            lines.append({
                "at": r.fetched_at.isoformat(), "url": r.url, "url_hash": url_hash,
                "status": r.status, "ms": round(r.elapsed_ms, 1), "bytes": r.size,
                "error": None if ok else r.verdict.reason, "worker": worker,
                "trace_id": r.trace_id,
                "to": r.final_url if r.redirects and r.final_url != r.url else None})
        if len(lines) > 2 * TRACE_LEN:   # only the last TRACE_LEN are sent
            del lines[:-TRACE_LEN]

    @property
    def flush_due(self) -> bool:
        return bool(self._counts) and time.monotonic() - self._flushed >= FLUSH_S

    async def flush(self) -> None:
        """Send the buffer in one pipeline. If Redis fails, those counters are dropped
        (logged by the caller): a retry could count twice what a pipeline half applied."""
        counts, lines = self._counts, self._lines
        self._counts, self._lines = {}, {}
        self._flushed = time.monotonic()
        if not counts and not lines:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for (source_id, minute), fields in counts.items():
                key = minute_key(source_id, minute)
                for field_name, value in fields.items():
                    if field_name == "lat_ms":
                        pipe.hincrbyfloat(key, field_name, value)
                    else:
                        pipe.hincrby(key, field_name, int(value))
                pipe.expire(key, KEEP_S)
            for source_id, kept in lines.items():
                key = trace_key(source_id)
                pipe.lpush(key, *(json.dumps(x) for x in kept[-TRACE_LEN:]))  # newest first
                pipe.ltrim(key, 0, TRACE_LEN - 1)
            await pipe.execute()


# -- reads: stateless, over the client the caller holds ----------------------------------


async def window(redis: HotRedis, source_id: str, minutes: int, *, end_offset: int = 0,
                 now: float | None = None) -> Window:
    """Counters of the last ``minutes`` minutes (ending ``end_offset`` minutes before
    ``now``, default the current time)."""
    now = int((now or time.time()) // 60) - end_offset
    async with redis.pipeline(transaction=False) as pipe:
        for m in range(now - minutes + 1, now + 1):
            pipe.hgetall(minute_key(source_id, m))
        rows = await pipe.execute()
    w = Window()
    for raw in rows:
        w.add(raw)
    return w


async def minutes(redis: HotRedis, source_ids: Sequence[str], count: int,
                  now: float | None = None) -> dict[str, list[tuple[int, Window]]]:
    """Per source, the last ``count`` minutes up to ``now``, the current one so far
    (epoch minute, counters), oldest first; minutes with no request are left out."""
    last = int((now or time.time()) // 60)
    span = range(last - count + 1, last + 1)
    async with redis.pipeline(transaction=False) as pipe:
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


async def last_request_at(redis: HotRedis, source_id: str) -> float | None:
    """Epoch seconds of the source's newest recorded request (None: none in the trace)."""
    newest = await trace(redis, source_id, TRACE_LEN)
    if not newest:
        return None
    return datetime.fromisoformat(str(newest[0]["at"])).timestamp()


async def trace(redis: HotRedis, source_id: str, n: int = TRACE_LEN) -> list[dict[str, object]]:
    """The last ``n`` requests, newest first (batches record their requests when they
    end, so the list is put in time order here)."""
    raw = await redis.lrange(trace_key(source_id), 0, n - 1)
    return sorted((json.loads(x) for x in raw), key=lambda t: str(t["at"]), reverse=True)
