"""clean: pages cleaned per core-second, rules and article extraction, end to end.

Simulator pages (products for ``kind: rules``, news for ``kind: article``) are staged in
a fresh database; one cleaner in this process (one core) claims, decompresses, extracts,
fingerprints and upserts them. ``clean_rules_pages_per_core_s`` has as baseline the bare
parse + selectors on the same pages; ``clean_article_pages_per_core_s`` has trafilatura
alone on the same pages, called as its documentation shows (``bare_extraction`` with
metadata, its own XPath prunes): the cleaner runs trafilatura's content extraction with
its whole-page prunes selected without regex callbacks (``stratacrawl.clean.prunes``) and
only the metadata steps for the fields an article record keeps, so its ratio can pass 1.
``clean_parallel_speedup``: article pages/s of ``clean --processes 2`` over one cleaner in
this process, the same pages staged afresh for each, in the same run (process start-up
included).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trafilatura
import uvloop
import yaml
from selectolax.lexbor import LexborHTMLParser

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from stratacrawl.clean import prunes
from stratacrawl.cold.staging import (
    COLUMNS,
    TYPES,
    copy_encoded_json,
    ensure_partitions,
    make_row,
)
from stratacrawl.process.tuning import tune_long_running
from stratacrawl.sim import build_specs
from stratacrawl.sim.crawl_config import sources_document
from stratacrawl.sim.render import item_html
from stratacrawl.sim.spec import SourceSpec
from stratacrawl.sources import SourcesFile, load_sources, parse_sources

FIGURES = ("clean_rules_pages_per_core_s",
           "clean_article_pages_per_core_s",
           "clean_parallel_speedup")


def _pages(spec: SourceSpec, n: int) -> list[tuple[str, bytes]]:
    return [(f"{spec.base_url}/{'product' if spec.kind == 'products' else 'article'}/{k}",
             item_html(spec, k, False)) for k in range(n)]


async def _stage(c: Any, source_id: str, pages: list[tuple[str, bytes]]) -> None:
    now = datetime.now(UTC)
    async with c.pool.connection() as conn, conn.transaction():
        await ensure_partitions(conn, {now.date().isoformat()})
        async with conn.cursor() as cur:
            copy_encoded_json(cur)
            async with cur.copy(f"COPY staging ({', '.join(COLUMNS)}) FROM STDIN "
                                "(FORMAT BINARY)") as copy:
                copy.set_types(list(TYPES))
                for i, (url, body) in enumerate(pages):
                    await copy.write_row(make_row(
                        fetched_at=now, fetch_key=f"bench:{source_id}:{i}",
                        source_id=source_id, task_id=i, attempt=1, url=url, final_url=url,
                        status=200, headers={}, content_type="text/html; charset=utf-8",
                        body=body, elapsed_ms=1.0,
                        trace_id="bench", worker="bench", kind="item", success=True))


async def _clean(sources: SourcesFile, source_id: str, pages: list[tuple[str, bytes]]
                 ) -> tuple[float, int]:
    with bench_runtime("clean") as rt:
        async with bench_components(rt) as c:
            await _stage(c, source_id, pages)
            cleaner = c.cleaner(sources)
            t0 = time.monotonic()
            stats = await cleaner.run(source_ids=[source_id])
            return time.monotonic() - t0, stats.inserted


async def _clean_with(processes: int, sources: SourcesFile, source_id: str,
                      pages: list[tuple[str, bytes]]) -> float:
    """Seconds to clean ``pages`` with ``processes`` cleaners (1: in this process)."""
    with bench_runtime("clean") as rt:
        async with bench_components(rt) as c:
            await _stage(c, source_id, pages)
            t0 = time.monotonic()
            report = await c.clean(sources, source_ids=[source_id], processes=processes)
            assert report.stats.pages == len(pages), report.stats
            return time.monotonic() - t0


def _baseline_rules(pages: list[tuple[str, bytes]]) -> float:
    t0 = time.monotonic()
    for _, body in pages:
        tree = LexborHTMLParser(body.decode())
        for css in ("h1.name", "span.price", "div.stock"):
            tree.css_first(css)
    return time.monotonic() - t0


def _baseline_article(pages: list[tuple[str, bytes]]) -> float:
    with prunes.as_shipped():  # trafilatura as released, not with the cleaner's prunes
        t0 = time.monotonic()
        for url, body in pages:
            trafilatura.bare_extraction(body.decode(), url=url, with_metadata=True,
                                        include_comments=False, include_tables=False,
                                        include_images=False, include_links=False)
        return time.monotonic() - t0


def run(size: Size = "full") -> Iterator[Figure]:
    tune_long_running()  # as `stratacrawl clean` does (the baselines run in the same process)
    specs = build_specs(3, 21)
    sources = parse_sources(sources_document(specs))
    products = next(s for s in specs if s.kind == "products")
    news = next(s for s in specs if s.kind == "news")
    n_rules, n_article = sized(size, smoke=(40, 10), quick=(500, 100), full=(5000, 1000))

    pages = _pages(products, n_rules)
    first = _baseline_rules(pages)
    seconds, records = uvloop.run(_clean(sources, products.id, pages))
    base = min(first, _baseline_rules(pages))  # the faster of a run before and one after
    yield Figure("clean", "clean_rules_pages_per_core_s", n_rules / seconds, "1/s",
                 n_rules / base, "lexbor parse + the 3 selectors alone, same pages",
                 extra={"pages": n_rules, "records": records,
                        "mean_page_kb": round(sum(len(b) for _, b in pages) / n_rules / 1024, 1)})

    pages = _pages(news, n_article)
    first = _baseline_article(pages)
    seconds, records = uvloop.run(_clean(sources, news.id, pages))
    base = min(first, _baseline_article(pages))  # the faster of a run before and one after
    yield Figure("clean", "clean_article_pages_per_core_s", n_article / seconds, "1/s",
                 n_article / base, "trafilatura.bare_extraction alone, same pages",
                 extra={"pages": n_article, "records": records})

    with tempfile.TemporaryDirectory(prefix="bench-clean-") as tmp:
        path = Path(tmp) / "sources.yaml"
        path.write_text(yaml.safe_dump(sources_document(specs), sort_keys=False))
        on_file = load_sources(path)   # cleaner processes read the file themselves
        one = uvloop.run(_clean_with(1, on_file, news.id, pages))
        two = uvloop.run(_clean_with(2, on_file, news.id, pages))
    yield Figure("clean", "clean_parallel_speedup", one / two, "x", extra={
        "pages": n_article, "one_process_pages_per_s": round(n_article / one, 1),
        "two_processes_pages_per_s": round(n_article / two, 1), "cores": os.cpu_count()})
