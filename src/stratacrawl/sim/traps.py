"""The simulator's hostile pages: a gzip bomb (256 MB of zeros in ~250 KB), a 50 MB page
streamed without compression, for the crawler's size caps to hold against."""

from __future__ import annotations

import functools
import threading
import zlib

from aiohttp import web

BOMB_BYTES = 256 * 2**20
BIG_BYTES = 50 * 2**20

_bomb: bytes | None = None
_bomb_lock = threading.Lock()


def gzip_bomb() -> bytes:
    """256 MB of zeros, gzip-compressed to ~250 KB; built once per process."""
    global _bomb
    with _bomb_lock:
        if _bomb is None:
            comp = zlib.compressobj(9, zlib.DEFLATED, 31)
            zeros = bytes(2**20)
            parts = [comp.compress(zeros) for _ in range(BOMB_BYTES // len(zeros))]
            _bomb = b"".join(parts) + comp.flush()
        return _bomb


@functools.cache
def big_body() -> bytes:
    return b"<html><body>" + b"x" * BIG_BYTES + b"</body></html>"


STREAM_CHUNK = 2**20


async def stream(request: web.Request, body: bytes, ctype: str) -> web.StreamResponse:
    """``body`` a megabyte at a time, each write waiting for the socket: a client that
    stops reading (a crawler at its size cap) ends it, instead of the whole body being
    copied into the connection's buffer first."""
    resp = web.StreamResponse(headers={"Content-Type": ctype})
    resp.content_length = len(body)
    await resp.prepare(request)
    view = memoryview(body)
    try:
        for i in range(0, len(body), STREAM_CHUNK):
            await resp.write(view[i:i + STREAM_CHUNK])
        await resp.write_eof()
    except (ConnectionError, RuntimeError):  # the client went away mid-body
        pass
    return resp
