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

        report = asyncio.run(run_demo(settings(), n_sources=sources, seed=seed, out=console.print))
    except StratacrawlError as e:
        fail(e)
    console.print(report)
