import gzip
import zlib

import brotli
import httpx
import pytest

from stratacrawl.fetch.classify import Kind, classify_exception, classify_status, parse_retry_after
from stratacrawl.fetch.decode import BoundedDecoder, TooLarge, decode_all
from stratacrawl.fetch.politeness import interval_for

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("status, kind", [
    (200, Kind.OK), (204, Kind.OK), (304, Kind.NOT_MODIFIED),
    (500, Kind.TRANSIENT), (502, Kind.TRANSIENT), (503, Kind.TRANSIENT), (408, Kind.TRANSIENT),
    (429, Kind.RATE_LIMITED),
    (400, Kind.TERMINAL), (401, Kind.TERMINAL), (403, Kind.TERMINAL), (404, Kind.TERMINAL),
    (410, Kind.TERMINAL), (451, Kind.TERMINAL),
])
def test_each_status_class(status: int, kind: Kind) -> None:
    assert classify_status(status).kind is kind


def test_retry_after_is_honoured() -> None:
    v = classify_status(429, "7")
    assert v.kind is Kind.RATE_LIMITED and v.retry_after_s == 7 and not v.level1_retry
    assert classify_status(503, "120").kind is Kind.RATE_LIMITED  # explicit: wait, no retry
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("garbage", default=5) == 5


@pytest.mark.parametrize("exc, kind, reason", [
    (httpx.ConnectTimeout("x"), Kind.TRANSIENT, "timeout"),
    (httpx.ReadTimeout("x"), Kind.TRANSIENT, "timeout"),
    (TimeoutError(), Kind.TRANSIENT, "timeout"),
    (httpx.ConnectError("x"), Kind.TRANSIENT, "connect-error"),
    (httpx.RemoteProtocolError("x"), Kind.TRANSIENT, "connection-reset"),
    (httpx.ReadError("x"), Kind.TRANSIENT, "connection-reset"),
    (httpx.UnsupportedProtocol("x"), Kind.TERMINAL, "bad-url"),
    (ValueError("x"), Kind.TERMINAL, "ValueError"),
])
def test_each_exception_class(exc: BaseException, kind: Kind, reason: str) -> None:
    v = classify_exception(exc)
    assert (v.kind, v.reason) == (kind, reason)
    assert v.level1_retry is (kind is Kind.TRANSIENT)


@pytest.mark.parametrize("encoding, compress", [
    ("gzip", gzip.compress), ("deflate", zlib.compress), ("br", brotli.compress),
    ("identity", lambda b: b)])
def test_decoding_round_trips_under_the_cap(encoding: str, compress) -> None:
    body = b"<html>" + b"hello world " * 10_000 + b"</html>"
    assert decode_all(compress(body), encoding, 1_000_000) == body


@pytest.mark.parametrize("encoding, compress", [
    ("gzip", gzip.compress), ("br", brotli.compress)])
def test_bombs_are_cut_off_without_inflating(encoding: str, compress) -> None:
    bomb = compress(bytes(40_000_000))
    d = BoundedDecoder(encoding, 5_000_000)
    with pytest.raises(TooLarge):
        for i in range(0, len(bomb), 65_536):
            d.feed(bomb[i:i + 65_536])
    assert d.size <= 5_000_001


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ValueError):
        BoundedDecoder("zstd", 10)  # not offered: no bounded decoder


def test_pace_intervals_jitter_but_never_undercut_the_rate() -> None:
    import random

    rng = random.Random(1)
    intervals = [interval_for(5.0, None, rng) for _ in range(5000)]
    assert min(intervals) >= 0.2 and max(intervals) <= 0.28 + 1e-9
    mean = sum(intervals) / len(intervals)
    assert abs(mean - 0.24) < 0.005  # (1.2 ± 0.2) / rate
    assert interval_for(5.0, 2.0, rng) == 2.0  # Crawl-delay wins when longer
