"""``stratacrawl bench NAME --json``: benchmarks live in the top-level ``bench/`` package."""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from pathlib import Path

import typer

from stratacrawl.cli.common import bad_input, console, fail


def _bench_root() -> Path:
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (candidate / "bench" / "__init__.py").exists():
            return candidate
    raise FileNotFoundError("bench/ not found: run from the Stratacrawl checkout")


def bench(name: str = typer.Argument(..., help="Benchmark name, e.g. sim, dedup, frontier."),
          as_json: bool = typer.Option(False, "--json", help="One JSON object per figure."),
          quick: bool = typer.Option(False, help="Smaller sizes, for a first look."),
          smoke: bool = typer.Option(False, help="The smallest sizes: seconds, every figure "
                                     "emitted, the values meaningless (what CI runs)."),
          known: int | None = typer.Option(None, min=100, help="Known URLs (bench scale)."),
          queued: int | None = typer.Option(None, min=0, help="Queued tasks (bench scale)."),
          sources: int | None = typer.Option(None, min=1, help="Sources (bench scale)."),
          noise: bool = typer.Option(False, help="Sites with real latency (~1.6 s) and a "
                                     "little 5xx (bench peers).")) -> None:
    """Run a benchmark against real servers; prints figure, baseline and ratio."""
    try:
        root = _bench_root()
    except FileNotFoundError as e:
        fail(str(e))
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(f"bench.{name.replace('-', '_')}")
    except ModuleNotFoundError:
        names = sorted(p.stem for p in (root / "bench").glob("*.py") if not p.stem.startswith("_"))
        bad_input(f"no benchmark {name!r}; have: {', '.join(names)}")
    sizes: dict[str, int | bool] = {
        k: v for k, v in (("known", known), ("queued", queued), ("sources", sources))
        if v is not None}
    if noise:
        sizes["noise"] = True
    accepted = inspect.signature(module.run).parameters
    if unknown := [f"--{k}" for k in sizes if k not in accepted]:
        bad_input(f"bench {name} takes no {', '.join(unknown)}")
    if known is not None and queued is not None and queued > known:
        bad_input(f"--queued {queued} is more than --known {known}")
    for figure in module.run("smoke" if smoke else "quick" if quick else "full", **sizes):
        if as_json:
            print(json.dumps(figure.as_dict()), flush=True)
        else:
            console.print(figure.describe())
