"""validate: seconds to validate one source-day of 1,000,000 records in PostgreSQL.

The records (name, price, currency, stock; 1 % of names missing) are generated in the
database; the source's checkpoint (count, freshness, completeness, validity, uniqueness)
runs through Great Expectations with SQL pushdown, Data Docs included; writing the source's
GX objects (``expectations init``) happens before the clock starts. Baseline: the same
checks as one hand-written SQL query over the same rows.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import uvloop

from bench.figure import Figure, Size, sized
from bench.servers import bench_components, bench_runtime
from stratacrawl.cold.records import NUMBER_RE
from stratacrawl.sources import parse_sources
from stratacrawl.validate.project import open_project, write_source

FIGURES = ("validate_seconds",)

SOURCE = {"id": "bulk", "seeds": ["http://bulk.test/"], "required": ["name", "price"],
          "freshness": "1d", "extract": {"kind": "rules", "fields": {
              "name": {"css": "h1"}, "price": {"css": ".p", "type": "price"},
              "currency": {"css": ".c"}, "stock": {"css": ".s", "type": "int"}}}}

GENERATE = """
INSERT INTO records (source_id, day, fingerprint, url, canonical_url, url_hash, staging_id,
                     crawled_at, fields)
SELECT 'bulk', %(day)s, md5('r' || i), 'http://bulk.test/p/' || i, 'http://bulk.test/p/' || i,
       md5('u' || i), i, now() - (i %% 3600) * interval '1 second',
       jsonb_build_object('name', CASE WHEN i %% 100 = 0 THEN NULL ELSE 'item ' || i END,
                          'price', round((1 + (i %% 5000) / 7.0)::numeric, 2),
                          'currency', 'EUR', 'stock', i %% 300)
FROM generate_series(1, %(n)s) AS i
"""

BASELINE = f"""
WITH f AS (
    SELECT canonical_url, created_at, NULLIF(btrim(fields->>'name'), '') AS name,
           NULLIF(btrim(fields->>'price'), '') AS price,
           NULLIF(btrim(fields->>'stock'), '') AS stock
    FROM records WHERE source_id = 'bulk' AND day = %(day)s)
SELECT count(DISTINCT canonical_url), max(created_at),
       count(*) FILTER (WHERE name IS NULL), count(*) FILTER (WHERE price IS NULL),
       count(*) FILTER (WHERE price !~ '{NUMBER_RE}'),
       count(*) FILTER (WHERE stock !~ '{NUMBER_RE}'),
       count(*) FILTER (WHERE CASE WHEN price ~ '{NUMBER_RE}' THEN price::float8 END <= 0),
       count(*) - count(DISTINCT canonical_url)
FROM f
"""


async def _measure(n: int) -> tuple[float, float, bool, list[str]]:
    sources = parse_sources({"sources": [dict(SOURCE, expected_daily=n)]})
    day = datetime.now(UTC).date()
    with bench_runtime("validate") as rt, tempfile.TemporaryDirectory() as tmp:
        async with bench_components(rt) as c:
            async with c.pool.connection() as conn:
                await conn.execute("SELECT sc_ensure_record_partition('bulk', %s)", (day,))
                await conn.execute(GENERATE, {"day": day, "n": n})
                await conn.execute("ANALYZE records")
            settings = rt.settings.model_copy(update={
                "expectations_dir": Path(tmp) / "exp", "gx_results_dir": Path(tmp) / "results",
                "data_docs_dir": Path(tmp) / "docs"})
            validator = c.validator(settings)
            # import time and `expectations init` are not validation time
            write_source(open_project(settings, rt.database_url), sources.sources[0])

            t0 = time.monotonic()
            (result,) = await validator.validate(sources.sources, [day])
            seconds = time.monotonic() - t0
            async with c.pool.connection() as conn:
                t0 = time.monotonic()
                await conn.execute(BASELINE, {"day": day})
                baseline = time.monotonic() - t0
            return seconds, baseline, result.success, [c.describe() for c in result.checks]


def run(size: Size = "full") -> Iterator[Figure]:
    n = sized(size, smoke=2_000, quick=100_000, full=1_000_000)
    seconds, baseline, success, checks = uvloop.run(_measure(n))
    # lower is better: ratio = ours / baseline (how many times the hand-written SQL)
    yield Figure("validate", "validate_seconds",   # (of one source-day of `records` records)
                 seconds, "s", baseline, "the same checks as one hand-written SQL query",
                 extra={"records": n, "suite_passed": success, "checks": checks})
