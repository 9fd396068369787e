"""``stratacrawl export``: a source's records since a day, as CSV, Parquet or JSON lines.

Rows stream from a server-side cursor in chunks, so an export costs bounded memory
whatever its size. JSON lines keep each record's fields as an object; CSV and Parquet
flatten them into columns (the source's declared fields, then any other found).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import IO, Any, Literal

from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.records import export_rows
from stratacrawl.errors import ConfigError

Format = Literal["csv", "parquet", "jsonl"]
FIXED = ("source", "url", "crawled_at", "day", "fingerprint")
CHUNK = 5000


async def _chunks(pool: AsyncConnectionPool, source_id: str, since: date,
                  until: date | None, skip: list[date],
                  typed: bool = False) -> AsyncIterator[list[dict[str, Any]]]:
    """Records in chunks; ``crawled_at`` and ``day`` as ISO text, or (``typed``: Parquet)
    as the datetime and date they are."""
    async with export_rows(pool, source_id, since, until, skip, CHUNK) as chunks:
        async for rows in chunks:
            if typed:
                yield [{"source": s, "url": u, "crawled_at": c, "day": d, "fingerprint": f,
                        "fields": fields} for s, u, c, d, f, fields in rows]
                continue
            yield [{"source": s, "url": u, "crawled_at": c.isoformat().replace("+00:00", "Z"),
                    "day": d.isoformat(), "fingerprint": f, "fields": fields}
                   for s, u, c, d, f, fields in rows]


@contextmanager
def _open(out: Path | None, binary: bool) -> Iterator[IO[Any]]:
    if out is None:
        yield sys.stdout.buffer if binary else sys.stdout
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb" if binary else "w", newline="" if not binary else None,
              encoding=None if binary else "utf-8") as fh:
        yield fh


def _flat(rec: dict[str, Any], names: list[str]) -> dict[str, Any]:
    row = {k: rec[k] for k in FIXED}
    for n in names:
        row[n] = rec["fields"].get(n)
    return row


async def export_records(pool: AsyncConnectionPool, *, source_id: str, since: date,
                         fmt: Format, out: Path | None = None, until: date | None = None,
                         field_types: dict[str, str] | None = None,
                         skip_days: list[date] | None = None) -> int:
    """Write the records (none of ``skip_days``); returns how many. ``out`` None = standard
    output (not Parquet)."""
    if fmt not in ("csv", "parquet", "jsonl"):
        raise ConfigError(f"unknown export format {fmt!r} (csv, parquet or jsonl)")
    if fmt == "parquet" and out is None:
        raise ConfigError("Parquet is binary: give --out FILE")
    names = list(field_types or {})
    skip = list(skip_days or [])
    count = 0
    if fmt == "jsonl":
        with _open(out, False) as fh:
            async for chunk in _chunks(pool, source_id, since, until, skip):
                fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk))
                count += len(chunk)
        return count
    if fmt == "csv":
        with _open(out, False) as fh:
            writer: csv.DictWriter[str] | None = None
            async for chunk in _chunks(pool, source_id, since, until, skip):
                if writer is None:
                    names += sorted({k for r in chunk for k in r["fields"]} - set(names))
                    writer = csv.DictWriter(fh, [*FIXED, *names], extrasaction="ignore")
                    writer.writeheader()
                writer.writerows(_flat(r, names) for r in chunk)
                count += len(chunk)
            if writer is None:
                csv.writer(fh).writerow([*FIXED, *names])
        return count
    return await _parquet(pool, source_id, since, until, skip, out, dict(field_types or {}))


def _fixed_schema() -> list[tuple[str, Any]]:
    """The fixed columns of a Parquet export: a crawl time is a UTC timestamp, a day a date."""
    import pyarrow as pa

    kinds = {"crawled_at": pa.timestamp("us", tz="UTC"), "day": pa.date32()}
    return [(k, kinds.get(k, pa.string())) for k in FIXED]


def _arrow_type(kind: str | None, sample: Any) -> Any:
    import pyarrow as pa

    if kind == "int" or (kind is None and isinstance(sample, int) and not isinstance(sample, bool)):
        return pa.int64()
    if kind in ("float", "price") or (kind is None and isinstance(sample, float)):
        return pa.float64()
    if kind is None and isinstance(sample, bool):
        return pa.bool_()
    return pa.string()


async def _parquet(pool: AsyncConnectionPool, source_id: str, since: date, until: date | None,
                   skip: list[date], out: Path | None, types: dict[str, str]) -> int:
    """Column types come from the declared field types (a column that is empty in the first
    chunk must not fix its type to null for the whole file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert out is not None
    names = list(types)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer: pq.ParquetWriter | None = None
    schema: pa.Schema | None = None
    count = 0
    try:
        async for chunk in _chunks(pool, source_id, since, until, skip, typed=True):
            if schema is None:
                samples: dict[str, Any] = {}
                for r in chunk:
                    for k, v in r["fields"].items():
                        if v is not None:
                            samples.setdefault(k, v)
                names += sorted(set(samples) - set(names))
                schema = pa.schema(_fixed_schema() + [
                    (n, _arrow_type(types.get(n), samples.get(n))) for n in names])
                writer = pq.ParquetWriter(str(out), schema, compression="zstd")
            table = pa.Table.from_pylist([_flat(r, names) for r in chunk], schema=schema)
            assert writer is not None
            writer.write_table(table)
            count += len(chunk)
    finally:
        if writer is not None:
            writer.close()
    if schema is None:  # no records: an empty file with the fixed columns
        pq.write_table(pa.schema(_fixed_schema()).empty_table(), str(out))
    return count


