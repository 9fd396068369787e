"""``stratacrawl docs serve``: the Data Docs over HTTP, without the ops page.

Great Expectations writes its Data Docs as static HTML; a browser opens ``file://`` pages
only from the address bar, not from a link in the Prefect UI or an alert. The ops page
(``stratacrawl ops``, started by ``stratacrawl up``) serves them under ``/docs/``; this
command serves them alone, for a host that runs validation but no ops page.
"""

from __future__ import annotations

import functools
import http.server

import typer

from stratacrawl.cli.common import console, fail, settings
from stratacrawl.cli.help import group

app = group("The validation reports (Great Expectations Data Docs).")


@app.command("serve")
def serve(port: int = typer.Option(8091, help="Port on 127.0.0.1."),
          host: str = typer.Option("127.0.0.1", help="Address to listen on.")) -> None:
    """Serve the Data Docs folder over HTTP until Ctrl-C; set STRATACRAWL_DATA_DOCS_URL to
    the address printed, so validation runs link their reports there."""
    folder = settings().data_docs_path
    if not (folder / "index.html").exists():
        fail(f"no Data Docs in {folder} yet: run `stratacrawl validate` first "
             "(or set STRATACRAWL_DATA_DOCS_DIR)")
    handler = functools.partial(_QuietHandler, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror}")
    console.print(f"Data Docs of {folder} on http://{host}:{server.server_port}/ "
                  f"(STRATACRAWL_DATA_DOCS_URL=http://{host}:{server.server_port}/); "
                  "Ctrl-C stops", highlight=False)
    with server:
        server.serve_forever()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """The standard library's file handler, without a log line per request."""

    def log_message(self, format: str, *args: object) -> None:
        pass
