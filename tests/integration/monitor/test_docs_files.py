"""The Data Docs file server (the ops page's /docs/ and `docs serve` share it): only files
inside the folder, links resolved first, folders by their index.html, never a listing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from aiohttp.test_utils import TestClient, TestServer

from stratacrawl.monitor.files import ConfinedFiles
from stratacrawl.services.embedded import free_port

pytestmark = pytest.mark.integration


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "data_docs"
    (docs / "validations" / "run").mkdir(parents=True)
    (docs / "index.html").write_text("<html>index</html>")
    (docs / "validations" / "run" / "page.html").write_text("<html>page</html>")
    (docs / "static").mkdir()
    (docs / "static" / "style.css").write_text("body {}")
    (docs / "passwd.html").symlink_to("/etc/passwd")
    (docs / "etc").symlink_to("/etc")
    (tmp_path / "secret.txt").write_text("secret")
    return docs


HOSTILE = ["passwd.html", "etc/passwd", "etc/", "etc", "../secret.txt", "%2e%2e/secret.txt",
           "static/", "validations/", "validations/run/", "nope.html"]


async def test_only_files_inside_the_folder_are_served(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    async with TestClient(TestServer(ConfinedFiles(docs).app())) as client:
        for path, text in (("index.html", "index"), ("", "index"),
                           ("validations/run/page.html", "page"), ("static/style.css", "body")):
            answer = await client.get(f"/{path}")
            assert answer.status == 200 and text in await answer.text(), path
        for path in HOSTILE:
            answer = await client.get(f"/{path}")
            body = await answer.text()
            assert answer.status == 404, (path, answer.status, body[:200])
            assert "root:" not in body and "secret" not in body and "Index of" not in body


def test_docs_serve_and_the_ops_page_refuse_the_same_paths(tmp_path: Path) -> None:
    """`stratacrawl docs serve` once followed a link in its folder to /etc/passwd and
    listed folders (the standard library's file server); it now answers as /docs/ does."""
    import os

    docs = _folder(tmp_path)
    port = free_port()
    env = {**os.environ, "STRATACRAWL_DATA_DOCS_DIR": str(docs),
           "STRATACRAWL_STATE_DIR": str(tmp_path / "state")}
    server = subprocess.Popen([sys.executable, "-m", "stratacrawl", "docs", "serve", "--port",
                               str(port)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert f"http://127.0.0.1:{port}/" in (server.stdout.readline() if server.stdout else "")
        assert httpx.get(f"http://127.0.0.1:{port}/index.html", timeout=10).status_code == 200
        for path in HOSTILE:
            answer = httpx.get(f"http://127.0.0.1:{port}/{path}", timeout=10)
            assert answer.status_code == 404, (path, answer.text[:200])
            assert "root:" not in answer.text and "Directory listing" not in answer.text
    finally:
        server.terminate()
        server.wait(10)
