"""Records: the fingerprint that makes them idempotent, and the SQL that upserts them.

A record's fingerprint is ``blake2b(source, canonical URL, hash of its fields)``: the same
content seen again is the same record (its ``crawled_at`` moves on); changed content is a
new record. ``record_keys`` keeps fingerprints unique across day partitions, so a record
stays in the day it was first seen. Re-cleaning a staged page replaces the records that
page produced before, so a rule fix never leaves duplicates behind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from psycopg import AsyncConnection

COLUMNS = ("source_id", "day", "fingerprint", "url", "canonical_url", "url_hash", "staging_id",
           "task_id", "trace_id", "crawled_at", "fields")


def content_hash(fields: dict[str, Any]) -> str:
    doc = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(doc.encode(), digest_size=16).hexdigest()


def record_fingerprint(source_id: str, canonical_url: str, fields: dict[str, Any]) -> str:
    key = f"{source_id}\n{canonical_url}\n{content_hash(fields)}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Record:
    source_id: str
    day: date
    fingerprint: str
    url: str
    canonical_url: str
    url_hash: str
    staging_id: int
    task_id: int | None
    trace_id: str | None
    crawled_at: datetime
    fields: dict[str, Any]

    def row(self) -> tuple[Any, ...]:
        return (self.source_id, self.day, self.fingerprint, self.url, self.canonical_url,
                self.url_hash, self.staging_id, self.task_id, self.trace_id, self.crawled_at,
                json.dumps(self.fields, ensure_ascii=False))


@dataclass
class UpsertResult:
    inserted: int = 0
    updated: int = 0
    replaced: int = 0       # records of re-cleaned pages that their new extraction superseded


async def upsert(conn: AsyncConnection, records: Sequence[Record],
                 recleaned: Sequence[int] = ()) -> UpsertResult:
    """Land ``records`` in one transaction (the caller's); ``recleaned`` are staging ids seen
    before, whose earlier records go unless the new extraction produced them again."""
    result = UpsertResult()
    await conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS clean_batch (source_id text, day date, fingerprint text, "
        "url text, canonical_url text, url_hash text, staging_id bigint, task_id bigint, "
        "trace_id text, crawled_at timestamptz, fields jsonb) ON COMMIT DELETE ROWS")
    if records:
        async with conn.cursor().copy(
                f"COPY clean_batch ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for r in records:
                await copy.write_row(r.row())
    if recleaned:
        cur = await conn.execute(
            "WITH gone AS (DELETE FROM records r WHERE r.staging_id = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM clean_batch b WHERE b.fingerprint = r.fingerprint) "
            "RETURNING r.fingerprint) "
            "DELETE FROM record_keys k USING gone WHERE k.fingerprint = gone.fingerprint",
            (list(recleaned),))
        result.replaced = cur.rowcount
    if not records:
        return result
    for source_id, day in sorted({(r.source_id, r.day) for r in records}):
        await conn.execute("SELECT sc_ensure_record_partition(%s, %s)", (source_id, day))
    cur = await conn.execute(  # new keys = new records (partitioned tables hide xmax)
        "INSERT INTO record_keys (fingerprint, source_id, day) "
        "SELECT DISTINCT ON (fingerprint) fingerprint, source_id, day FROM clean_batch "
        "ORDER BY fingerprint, crawled_at ON CONFLICT (fingerprint) DO NOTHING")
    result.inserted = cur.rowcount
    cur = await conn.execute(
        "INSERT INTO records AS r (source_id, day, fingerprint, url, canonical_url, url_hash, "
        "  staging_id, task_id, trace_id, crawled_at, fields) "
        "SELECT DISTINCT ON (b.fingerprint) b.source_id, k.day, b.fingerprint, b.url, "
        "  b.canonical_url, b.url_hash, b.staging_id, b.task_id, b.trace_id, b.crawled_at, b.fields "
        "FROM clean_batch b JOIN record_keys k USING (fingerprint) "
        "ORDER BY b.fingerprint, b.crawled_at DESC "
        "ON CONFLICT (source_id, day, fingerprint) DO UPDATE SET "
        "  crawled_at = GREATEST(r.crawled_at, excluded.crawled_at), "
        "  staging_id = CASE WHEN excluded.crawled_at >= r.crawled_at THEN excluded.staging_id "
        "               ELSE r.staging_id END, "
        "  url = excluded.url, fields = excluded.fields, updated_at = now()")
    result.updated = cur.rowcount - result.inserted
    return result
