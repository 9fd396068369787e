"""The local spool: fetched batches that could not reach PostgreSQL, on disk, fsync'd.

One file per batch (``<state>/spool/<time>-<id>.batch``): written to a temporary name,
fsync'd, renamed, folder fsync'd — so a file either is complete or does not exist.
The loader replays them idempotently and deletes each file only after its transaction
commits.

Format 2 (written): ``MAGIC`` then a zstd frame of MessagePack — a map of the format, the
owner and the fetches, each a map of ``StagedFetch``'s fields (the staging row and the
outcome as arrays, times as MessagePack timestamps): data only, nothing a reader executes,
and readable by any MessagePack library. Format 1 (pickle in zstd, no magic) is still
read, so files a crawl spooled before an upgrade are replayed after it.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack
import zstandard

from stratacrawl.cold.staging import StagedFetch
from stratacrawl.cold.tasks import Outcome, TaskState

FORMAT = 2
MAGIC = b"STRATACRAWL-SPOOL\x00"
_FIELDS = tuple(f.name for f in dataclasses.fields(StagedFetch))


def encode(owner: str, items: Sequence[StagedFetch]) -> bytes:
    """A spool file's bytes (format 2)."""
    fetches = [{name: getattr(i, name) for name in _FIELDS} for i in items]
    for f in fetches:
        f["outcome"] = [str(v) if isinstance(v, TaskState) else v for v in f["outcome"]]
    body = msgpack.packb({"format": FORMAT, "owner": owner, "items": fetches}, datetime=True)
    return MAGIC + zstandard.ZstdCompressor(level=3).compress(body)


def decode(data: bytes) -> tuple[str, list[StagedFetch]]:
    """(owner, fetches) of a spool file's bytes, format 2 or 1; ValueError when it is
    neither."""
    if not data.startswith(MAGIC):
        return _decode_v1(data)
    doc = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data[len(MAGIC):]),
                          timestamp=3, strict_map_key=False)
    if doc.get("format") != FORMAT:
        raise ValueError(f"unknown spool format {doc.get('format')!r}")
    return doc["owner"], [_fetch(f) for f in doc["items"]]


def _fetch(f: dict[str, Any]) -> StagedFetch:
    task_id, state, *rest = f["outcome"]
    f["outcome"] = Outcome(task_id, TaskState(state), *rest)
    f["row"] = tuple(f["row"]) if f["row"] is not None else None
    return StagedFetch(**f)


def _decode_v1(data: bytes) -> tuple[str, list[StagedFetch]]:
    """Format 1: pickle in zstd, written by this program only (the spool folder is its
    own); read so that files spooled before format 2 are still replayed."""
    try:
        doc = pickle.loads(zstandard.ZstdDecompressor().decompress(data))
    except (zstandard.ZstdError, pickle.UnpicklingError, EOFError) as e:
        raise ValueError(f"not a spool file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != 1:
        raise ValueError("unknown spool format")
    return doc["owner"], doc["items"]


class Spool:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def of_state(cls, state_path: Path) -> Spool:
        """This host's spool: ``<state>/spool`` (each host drains its own)."""
        return cls(state_path / "spool")

    def write(self, owner: str, items: Sequence[StagedFetch]) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.batch"
        payload = encode(owner, items)
        tmp = self.folder / (name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        final = self.folder / name
        tmp.replace(final)
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return final

    def files(self) -> list[Path]:
        if not self.folder.exists():
            return []
        return sorted(self.folder.glob("*.batch"))

    def read(self, path: Path) -> tuple[str, list[StagedFetch]]:
        try:
            return decode(path.read_bytes())
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def pending(self) -> int:
        return len(self.files())
