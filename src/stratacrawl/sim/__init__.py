"""The site simulator: a deterministic multi-source web on loopback to crawl, test and load-test.

``spec`` says what each source is and how it misbehaves, ``content`` derives every
item from the seed, ``render`` turns items into pages, ``server`` serves them.
"""

from stratacrawl.sim.server import Simulator, SimulatorThread
from stratacrawl.sim.spec import Behaviour, SourceSpec, build_specs

__all__ = ["Behaviour", "Simulator", "SimulatorThread", "SourceSpec", "build_specs"]
