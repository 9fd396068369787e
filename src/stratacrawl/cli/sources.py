"""``stratacrawl sources validate FILE``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from stratacrawl.cli.common import console, err
from stratacrawl.cli.help import group
from stratacrawl.errors import SourcesError

app = group("Sources files.")


@app.command()
def validate(file: Path) -> None:
    """Check a sources file; prints every problem (file, source, field) and exits 1 on any."""
    from stratacrawl.sources import load_sources

    try:
        parsed = load_sources(file)
    except SourcesError as e:
        for p in e.problems:
            err.print(f"[red]✗[/] {escape(str(p))}")
        raise typer.Exit(1) from None
    console.print(f"[green]✓[/] {file}: {len(parsed.sources)} source(s): {', '.join(parsed.ids)}")
