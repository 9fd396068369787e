"""A local HTTP receiver standing in for a chat or paging webhook."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Receiver(http.server.BaseHTTPRequestHandler):
    """Each POST kept as ``{"path", "json"}`` in ``received`` (class-wide)."""

    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        Receiver.received.append({"path": self.path, "json": json.loads(body or b"null")})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def webhook() -> Iterator[str]:
    """A receiver on 127.0.0.1 at a free port; yields its ``/hook`` URL."""
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
