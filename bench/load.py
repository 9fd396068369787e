"""A keep-alive HTTP load generator and a bare static server to compare against."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from typing import Any
from urllib.parse import urlsplit

import httptools
import uvloop
from aiohttp import web


class _Conn(asyncio.Protocol):
    """One keep-alive connection: send a GET, wait for the whole response (httptools parser)."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, int]] | None = None
        self.nbytes = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.nbytes += len(body)

    def on_message_complete(self) -> None:
        if self.waiter and not self.waiter.done():
            self.waiter.set_result((self.parser.get_status_code(), self.nbytes))
        self.nbytes = 0

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection lost"))


async def _hammer(urls: list[str], concurrency: int, seconds: float,
                  headers: dict[str, str]) -> tuple[int, int, int]:
    loop = asyncio.get_running_loop()
    targets: dict[tuple[str, int], list[bytes]] = {}
    for url in urls:
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        targets.setdefault((parts.hostname or "", parts.port or 80), []).append(path.encode())
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
    stats = [0, 0, 0]  # ok, errors, bytes
    deadline = time.monotonic() + seconds

    async def worker(host: str, port: int, paths: list[bytes], offset: int) -> None:
        request = b"GET %s HTTP/1.1\r\nHost: " + host.encode() + b"\r\n" + extra + b"\r\n"
        conn: _Conn | None = None
        i = offset
        while time.monotonic() < deadline:
            try:
                if conn is None or conn.transport is None or conn.transport.is_closing():
                    _, conn = await loop.create_connection(_Conn, host, port)
                conn.waiter = loop.create_future()
                assert conn.transport is not None
                conn.transport.write(request % paths[i % len(paths)])
                i += 1
                status, nbytes = await conn.waiter
            except (OSError, ConnectionError):
                stats[1] += 1
                conn = None
                continue
            if status == 200:
                stats[0] += 1
                stats[2] += nbytes
            else:
                stats[1] += 1
        if conn is not None and conn.transport is not None:
            conn.transport.close()

    hosts = list(targets.items())
    await asyncio.gather(*(worker(h, p, paths, n) for n in range(concurrency)
                           for (h, p), paths in [hosts[n % len(hosts)]]))
    return stats[0], stats[1], stats[2]


def hammer(urls: list[str], *, concurrency: int = 64, seconds: float = 5.0,
           headers: dict[str, str] | None = None) -> dict[str, float]:
    """Requests/s of 200 answers over ``seconds`` with ``concurrency`` keep-alive connections.

    The client is a raw asyncio protocol on httptools (wrk-style, ~40k req/s here), so
    it measures the server rather than itself.
    """
    t0 = time.monotonic()
    ok, errors, nbytes = uvloop.run(_hammer(urls, concurrency, seconds,
                                            {"Accept-Encoding": "identity", **(headers or {})}))
    elapsed = time.monotonic() - t0
    return {"per_s": ok / elapsed, "ok": ok, "errors": errors,
            "mean_bytes": nbytes / ok if ok else 0.0}


def _serve_static(body: bytes, host: str, port_q: Any, stop: Any) -> None:
    async def main() -> None:
        async def handle(request: web.Request) -> web.Response:
            return web.Response(body=body, content_type="text/html")

        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        port_q.put(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        await runner.cleanup()

    uvloop.run(main())


class StaticServer:
    """A bare aiohttp server answering every GET with the same bytes, in a child process."""

    def __init__(self, body: bytes, host: str = "127.0.0.9") -> None:
        self.body = body
        self.host = host
        ctx = mp.get_context("spawn")
        self._q = ctx.Queue()
        self._stop = ctx.Event()
        self._proc = ctx.Process(target=_serve_static, args=(body, host, self._q, self._stop),
                                 daemon=True)
        self.url = ""

    def __enter__(self) -> StaticServer:
        self._proc.start()
        self.url = f"http://{self.host}:{self._q.get(timeout=30)}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()


def aiohttp_ceiling(urls: list[str], *, concurrency: int = 64, seconds: float = 5.0
                    ) -> dict[str, float]:
    """Requests/s of a plain aiohttp client session (the issue's baseline client)."""
    import aiohttp

    async def main() -> tuple[int, int]:
        ok = errors = 0
        deadline = time.monotonic() + seconds
        conn = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        async with aiohttp.ClientSession(connector=conn) as session:
            async def worker(offset: int) -> None:
                nonlocal ok, errors
                i = offset
                while time.monotonic() < deadline:
                    try:
                        async with session.get(urls[i % len(urls)]) as r:
                            await r.read()
                            ok += r.status == 200
                    except aiohttp.ClientError:
                        errors += 1
                    i += concurrency

            await asyncio.gather(*(worker(n) for n in range(concurrency)))
        return ok, errors

    t0 = time.monotonic()
    ok, errors = uvloop.run(main())
    return {"per_s": ok / (time.monotonic() - t0), "ok": ok, "errors": errors}
