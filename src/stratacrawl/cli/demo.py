"""``stratacrawl demo``: the main job end to end on embedded defaults."""

from __future__ import annotations

import asyncio

import typer

from stratacrawl.cli.common import console, fail, settings
from stratacrawl.errors import StratacrawlError


def demo(sources: int = typer.Option(3, help="Simulated sources to crawl."),
         seed: int = typer.Option(7, help="Simulator seed.")) -> None:
    """Start the embedded tiers and the site simulator, crawl it, print what each tier holds."""
    try:
        from stratacrawl.demo import run_demo  # cleaning and validation: only here

        # A state folder of its own (<state>/demo: its own embedded tiers, Data Docs and
        # sources file), so the demo and the platform of `stratacrawl up` never share a
        # ledger: the demo's simulator is gone when it ends, and a platform that inherited
        # its tasks would fetch dead addresses.
        s = settings()
        own = s.model_copy(update={"state_dir": s.state_path / "demo"})
        report = asyncio.run(run_demo(own, n_sources=sources, seed=seed, out=console.print))
    except StratacrawlError as e:
        fail(e)
    console.print(report)
