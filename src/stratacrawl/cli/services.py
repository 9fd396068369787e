"""``stratacrawl services up|down|status``: the embedded tiers."""

from __future__ import annotations

from stratacrawl.cli.common import console, fail, settings
from stratacrawl.cli.help import group
from stratacrawl.errors import ServiceError
from stratacrawl.services import Services
from stratacrawl.services.resolve import down as services_down
from stratacrawl.services.resolve import status as services_status

app = group("Start, stop and show the tiers' servers.")


@app.command()
def up() -> None:
    """Start the embedded server of every tier that has no configured URL; they keep running."""
    s = settings()
    try:
        Services(s, keep=True).start()
    except ServiceError as e:
        fail(e)
    status()


@app.command()
def down() -> None:
    """Stop the embedded servers recorded in the state folder."""
    stopped = services_down(settings())
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))


@app.command()
def status() -> None:
    """Print each tier's state and URL."""
    for tier, (state, url) in services_status(settings()).items():
        console.print(f"{tier:<14} {state:<11} {url or '-'}")
