"""Simulated sites for tests: a small still site, its sources file, and what a crawl of
it staged — shared by the integration and end-to-end suites; and a hand-made site (an
aiohttp application) served on a free local port."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from stratacrawl.cold.staging import decode_body
from stratacrawl.crawl import CrawlReport, crawl
from stratacrawl.frontier.links import canonical_link
from stratacrawl.sim import Behaviour, SimulatorThread, build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.sources import SourcesFile, parse_sources
from stratacrawl.wiring import Components


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """``app`` served on 127.0.0.1 at a free port; yields its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        await runner.cleanup()


def small_site(n: int, first_host: int, backlog: int = 40,
               behaviour: Behaviour | None = None) -> list[SourceSpec]:
    specs = build_specs(n, 11, first_host=first_host, behaviour=behaviour)
    for s in specs:
        s.backlog = backlog
        s.publish_every_s = 3600.0  # a still site: the truth does not move during the test
    return specs


def sources_for(specs: list[SourceSpec], **overrides: Any) -> SourcesFile:
    doc = sources_document(specs, rate=200.0, concurrency=4)
    for entry in doc["sources"]:
        entry.update(overrides)
    return parse_sources(doc)


async def staged_items(c: Components) -> dict[str, set[str]]:
    """Canonical URLs of the item pages in staging, per source."""
    out: dict[str, set[str]] = {}
    async with c.pool.connection() as conn:
        cur = await conn.execute("SELECT source_id, content_type, body, body_encoding "
                                 "FROM staging WHERE clean_state = 'new'")
        for source_id, ctype, body, encoding in await cur.fetchall():
            raw = decode_body(body, encoding)
            url = json.loads(raw)["url"] if "json" in ctype else canonical_link(raw)
            out.setdefault(source_id, set()).add(url)
    return out


async def task_states(c: Components) -> dict[str, tuple[str, str | None]]:
    async with c.pool.connection() as conn:
        cur = await conn.execute("SELECT url, state, last_error FROM tasks")
        return {u: (s, e) for u, s, e in await cur.fetchall()}


async def crawl_every_item(c: Components, st: SimulatorThread,
                            specs: list[SourceSpec]) -> CrawlReport:
    """Crawl the site until idle; every item of its ground truth staged, none twice."""
    report = await crawl(c, sources_for(specs), until_idle=True, seconds=120, flush_s=0.5)
    truth = st.sim.truth()
    staged = await staged_items(c)
    for spec in specs:
        assert {it["url"] for it in truth[spec.id]} <= staged.get(spec.id, set()), spec.id
    async with c.pool.connection() as conn:
        dup = await (await conn.execute(
            "SELECT count(*) - count(DISTINCT fetch_key) FROM staging")).fetchone()
    assert dup == (0,)
    assert report.writer is not None and report.writer.spooled == 0
    return report
