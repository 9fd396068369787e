"""A simulator process of ``n`` sources and the sources file a crawler would use for it
(fast settings: rate 2,000/s unless given, 8 batches at once, batches of 100) — shared by
benchmarks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import yaml

from stratacrawl.sim import build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sim.process import SimulatorProcess
from stratacrawl.sources import SourcesFile, parse_sources

EPOCH = "2026-11-30T00:00:00+00:00"


@contextlib.contextmanager
def simulated_site(n: int, seed: int, *, first_host: int, backlog: int,
                   oversized_rate: float | None = None, write_to: Path | None = None,
                   epoch: str = EPOCH, rate: float = 2000.0, noise: bool = False,
                   ) -> Iterator[tuple[SimulatorProcess, SourcesFile]]:
    """``oversized_rate``: share of 1-5 MB item pages (the simulator's default if None);
    ``write_to``: also write the sources file there (for a ``stratacrawl crawl`` child);
    ``epoch``: the sites' start (items keep appearing after it: an epoch of now gives a
    site of ``backlog`` items that a crawl can finish); ``rate``: each source's requests/s
    in the sources file; ``noise``: sites with real latency (~1.6 s median) and a little
    5xx and resets."""
    extra = (("--oversized-rate", str(oversized_rate)) if oversized_rate is not None else ()) \
        + (("--noise",) if noise else ())
    with SimulatorProcess("--sources", str(n), "--seed", str(seed), "--epoch", epoch,
                          "--first-host", str(first_host), "--backlog", str(backlog),
                          *extra) as sim:
        specs = build_specs(n, seed, epoch=datetime.fromisoformat(epoch), first_host=first_host,
                            ports=[int(s["url"].rsplit(":", 1)[1]) for s in sim.sources],
                            noise=noise)
        for spec in specs:
            spec.backlog = backlog
        document = sources_document(specs, rate=rate, concurrency=8)
        for entry in document["sources"]:
            entry["batch_size"] = 100
        if write_to is not None:
            write_to.write_text(yaml.safe_dump(document, sort_keys=False))
        yield sim, parse_sources(document)
