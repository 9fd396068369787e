"""The one file server of the Data Docs, for the ops page (``/docs/``) and
``stratacrawl docs serve`` alike.

The folder is written by Great Expectations, but what a request names is a stranger's
input: a path is resolved (symbolic links followed) before it is served, and anything that
resolves outside the folder — ``..``, an encoded ``%2e%2e``, a link to ``/etc/passwd`` or
to ``/etc`` — answers 404. A folder answers with its ``index.html`` or 404: never a
listing.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web


class ConfinedFiles:
    """Files of ``folder`` served from ``{path}`` of a route."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def resolve(self, path: str) -> Path | None:
        """The file ``path`` names inside the folder, or None (outside it, a folder
        without an ``index.html``, nothing there)."""
        root = self.folder.resolve()
        target = (root / path.lstrip("/")).resolve()
        if target.is_dir():
            target = (target / "index.html").resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return None
        return target

    async def handle(self, request: web.Request) -> web.StreamResponse:
        found = self.resolve(request.match_info.get("path", ""))
        if found is None:
            raise web.HTTPNotFound()
        return web.FileResponse(found)

    def app(self) -> web.Application:
        """An application serving the folder at its root (``docs serve``)."""
        app = web.Application()
        app.router.add_get("/{path:.*}", self.handle)
        return app
