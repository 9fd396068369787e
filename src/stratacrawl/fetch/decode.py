"""Content decoding with a cap on the decoded size (a gzip bomb is cut off, not inflated)."""

from __future__ import annotations

import zlib

import brotli

from stratacrawl.errors import TerminalFetchError

# Not zstd: its streaming decoder has no output bound, so a zstd bomb could not be cut off.
SUPPORTED = ("gzip", "deflate", "br")
ACCEPT_ENCODING = "gzip, deflate, br"


class TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"more than {limit} bytes")


class BoundedDecoder:
    """Feed raw chunks, get decoded bytes; raises :class:`TooLarge` past ``limit`` bytes."""

    def __init__(self, encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.size = 0
        enc = (encoding or "identity").strip().lower()
        self.encoding = enc
        if enc in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._z = zlib.decompressobj()
        elif enc == "br":
            self._br = brotli.Decompressor()
        elif enc not in ("identity", ""):
            raise ValueError(f"unsupported content-encoding {encoding!r}")

    def _count(self, out: bytes) -> bytes:
        self.size += len(out)
        if self.size > self.limit:
            raise TooLarge(self.limit)
        return out

    def feed(self, chunk: bytes) -> bytes:
        room = self.limit - self.size + 1
        if self.encoding in ("gzip", "x-gzip", "deflate"):
            out = self._z.decompress(chunk, room)
            if self._z.unconsumed_tail:  # more output than room: over the limit
                raise TooLarge(self.limit)
            return self._count(out)
        if self.encoding == "br":
            out = self._br.process(chunk, output_buffer_limit=room)
            if not self._br.can_accept_more_data():
                raise TooLarge(self.limit)
            return self._count(out)
        return self._count(chunk)

    def flush(self) -> bytes:
        if self.encoding in ("gzip", "x-gzip", "deflate"):
            return self._count(self._z.flush())
        return b""


def decode_all(body: bytes, encoding: str | None, limit: int, url: str = "") -> bytes:
    """Decode a whole body (tests, spool replays); raises a terminal fetch error past limit."""
    d = BoundedDecoder(encoding, limit)
    try:
        return d.feed(body) + d.flush()
    except TooLarge:
        raise TerminalFetchError(f"decoded body over {limit} bytes", url=url,
                                 kind="too-large") from None
