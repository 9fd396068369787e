"""A record's fingerprint, which makes cleaning idempotent: ``blake2b(source, canonical
URL, hash of its fields)`` — the same content seen again is the same record; changed
content is a new record (``cold/records.py`` stores them)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def content_hash(fields: dict[str, Any]) -> str:
    doc = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(doc.encode(), digest_size=16).hexdigest()


def record_fingerprint(source_id: str, canonical_url: str, fields: dict[str, Any]) -> str:
    key = f"{source_id}\n{canonical_url}\n{content_hash(fields)}"
    return hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
