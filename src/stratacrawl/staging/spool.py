"""The local spool: fetched batches that could not reach PostgreSQL, on disk, fsync'd.

One file per batch (``<state>/spool/<time>-<id>.batch``): written to a temporary name,
fsync'd, renamed, folder fsync'd — so a file either is complete or does not exist.
Contents are our own plain tuples (pickle, zstd-compressed); the loader replays them
idempotently and deletes each file only after its transaction commits.
"""

from __future__ import annotations

import os
import pickle
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import zstandard

from stratacrawl.cold.staging import StagedFetch

FORMAT = 1


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
        payload = zstandard.ZstdCompressor(level=3).compress(
            pickle.dumps({"format": FORMAT, "owner": owner, "items": list(items)}, protocol=5))
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
        data = pickle.loads(zstandard.ZstdDecompressor().decompress(path.read_bytes()))
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown spool format {data.get('format')!r}")
        return data["owner"], data["items"]

    def pending(self) -> int:
        return len(self.files())
