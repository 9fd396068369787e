"""cli: how long the command line takes to answer ``--help`` — the whole tool's and each
command's — against a one-command Typer program's ``--help`` in the same run (the floor of
any Typer CLI on this interpreter: Python, Typer and Rich start-up).

Each figure is the best of several runs in a fresh process (the import cost is what is
measured; the page cache is warm after the first). A command whose module imports its
engine at the top (the crawler, Great Expectations, Prefect) shows here at once.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.figure import Figure, Size, sized

FIGURES = ("help_s", "command_help_max_s")

# The floor: a Typer program with one command, its help rendered by Rich as ours is.
_FLOOR = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def one(x: int = typer.Option(1, help="An option.")) -> None:
    '''One command.'''
@app.command()
def two() -> None:
    '''Another.'''
app()
"""

COMMANDS = ["services", "sources", "sim", "docs", "doctor", "demo", "up", "down", "bench", "crawl",
            "loadtest", "submit", "url-rules", "clean", "validate", "export", "alerts",
            "expectations", "lookup", "recover", "demote", "sink", "compensate", "trace", "ops",
            "monitor", "inspect", "alert-rules", "metrics"]


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("stratacrawl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "stratacrawl"]


def _best(argv: list[str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def run(size: Size = "full") -> Iterator[Figure]:
    runs = sized(size, smoke=1, quick=2, full=5)
    floor = _best([sys.executable, "-c", _FLOOR, "--help"], runs)
    top = _best([*_cli(), "--help"], runs)
    yield Figure("cli", "help_s", top, "s", floor, "a one-command Typer program's --help",
                 extra={"commands": len(COMMANDS)})
    each = {name: _best([*_cli(), name, "--help"], max(1, runs - 2)) for name in COMMANDS}
    slowest = max(each, key=lambda n: each[n])
    yield Figure("cli", "command_help_max_s", each[slowest], "s", floor,
                 "a one-command Typer program's --help",
                 extra={"slowest": slowest, "median_s": round(sorted(each.values())[len(each) // 2], 3)})
