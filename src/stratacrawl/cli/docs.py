"""``stratacrawl docs serve``: the Data Docs over HTTP, without the ops page.

Great Expectations writes its Data Docs as static HTML; a browser opens ``file://`` pages
only from the address bar, not from a link in the Prefect UI or an alert. The ops page
(``stratacrawl ops``, started by ``stratacrawl up``) serves them under ``/docs/``; this
command serves them alone, for a host that runs validation but no ops page.
"""

from __future__ import annotations

import asyncio

import typer

from stratacrawl.cli.common import console, fail, run, settings
from stratacrawl.cli.help import group

app = group("The validation reports (Great Expectations Data Docs).")


@app.command("serve")
def serve(port: int = typer.Option(8091, help="Port on 127.0.0.1."),
          host: str = typer.Option("127.0.0.1", help="Address to listen on.")) -> None:
    """Serve the Data Docs folder over HTTP until Ctrl-C; set STRATACRAWL_DATA_DOCS_URL to
    the address printed, so validation runs link their reports there. Only files inside
    the folder are served (links resolved first); a folder answers with its index.html."""
    from aiohttp import web

    from stratacrawl.monitor.files import ConfinedFiles

    folder = settings().data_docs_path
    if not (folder / "index.html").exists():
        fail(f"no Data Docs in {folder} yet: run `stratacrawl validate` first "
             "(or set STRATACRAWL_DATA_DOCS_DIR)")

    async def main() -> None:
        runner = web.AppRunner(ConfinedFiles(folder).app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            fail(f"cannot listen on {host}:{port}: {e.strerror}")
        bound = runner.addresses[0][1] if runner.addresses else port
        console.print(f"Data Docs of {folder} on http://{host}:{bound}/ "
                      f"(STRATACRAWL_DATA_DOCS_URL=http://{host}:{bound}/); Ctrl-C stops",
                      highlight=False)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    run(main())
