"""sim: pages/s the simulator serves over keep-alive loopback (30 KB median pages).

Baseline: a bare aiohttp server answering every request with one page of the
same size (the ceiling of the server stack on this machine), same client, same run.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from bench.figure import Figure, Size, sized
from bench.load import StaticServer, hammer
from stratacrawl.sim.process import SimulatorProcess

FIGURES = ("sim_pages_per_s",)


def run(size: Size = "full") -> Iterator[Figure]:
    seconds = sized(size, smoke=0.5, quick=3.0, full=8.0)
    with SimulatorProcess("--sources", "5", "--seed", "7") as sim:
        urls: list[str] = []
        with httpx.Client() as c:
            for s in sim.sources:
                if s["kind"] != "news":
                    continue
                items = c.get(s["url"] + "/_sim/truth").json()["items"]
                # Pages of the ordinary size range (the 1-5 MB tail is for other tests).
                urls += [it["url"] for it in items[:400]]
            sizes = {u: len(c.get(u).content) for u in urls}
        urls = [u for u in urls if sizes[u] < 200_000]
        median = sorted(sizes[u] for u in urls)[len(urls) // 2]
        hammer(urls, seconds=1.0)  # warm the page cache
        sim_rate = hammer(urls, seconds=seconds)
    with StaticServer(b"x" * median) as static:
        base = hammer([static.url + "/page"], seconds=seconds)
    yield Figure("sim", "sim_pages_per_s", sim_rate["per_s"], "1/s", base["per_s"],
                 "bare aiohttp server, same page size, same client",
                 extra={"median_page_bytes": median, "pages": len(urls),
                        "errors": sim_rate["errors"], "concurrency": 64})
