"""The local spool: fetched batches that could not reach PostgreSQL, on disk, fsync'd.

One file per batch (``<state>/spool/<time>-<id>.batch``): written to a temporary name,
fsync'd, renamed, folder fsync'd — so a file either is complete or does not exist.
The loader replays them idempotently and deletes each file only after its transaction
commits.

Format 2, the only one read: ``MAGIC`` then a zstd frame of MessagePack — a map of the
format, the owner and the fetches, each a map of ``StagedFetch``'s fields (the staging row
and the outcome as arrays, times as MessagePack timestamps): data only, nothing a reader
executes, and readable by any MessagePack library.

A spool file outlives the process that wrote it and anyone who can write to the state
folder can put one there, so it is read as untrusted input: a file that is not format 2
(empty, truncated, random bytes, a bad header, format 1 — pickle, which would run code if
loaded — or a format from a newer version) is never deserialized further. It is moved to
``<spool>/damaged/`` with a ``.why`` file beside it saying what was wrong, named in the
drain's report, and no longer counts as pending, so it never holds up a crawl's idleness.
"""

from __future__ import annotations

import dataclasses
import os
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
DAMAGED = "damaged"
_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"   # how a format-1 file (a bare zstd frame) begins
# What to do with a format-1 file, in the reason it is set aside with.
FORMAT_1_WAY_OUT = ("replay it with the Stratacrawl version that wrote it (`stratacrawl "
                    "recover`), or delete it: its pages are fetched again")
# A `.tmp` file this old is a write that never finished (its process died): never read.
STALE_TMP_S = 600.0
_FIELDS = tuple(f.name for f in dataclasses.fields(StagedFetch))


def encode(owner: str, items: Sequence[StagedFetch]) -> bytes:
    """A spool file's bytes (format 2)."""
    fetches = [{name: getattr(i, name) for name in _FIELDS} for i in items]
    for f in fetches:
        f["outcome"] = [str(v) if isinstance(v, TaskState) else v for v in f["outcome"]]
    body = msgpack.packb({"format": FORMAT, "owner": owner, "items": fetches}, datetime=True)
    return MAGIC + zstandard.ZstdCompressor(level=3).compress(body)


def decode(data: bytes) -> tuple[str, list[StagedFetch]]:
    """(owner, fetches) of a spool file's bytes; ValueError saying what is wrong with
    anything but a whole format-2 file. Nothing is deserialized before the header and
    the format are known."""
    if not data:
        raise ValueError("empty file")
    if not data.startswith(MAGIC):
        if data.startswith(_ZSTD_FRAME):
            raise ValueError("a format-1 spool file (pickle), never loaded: reading pickle "
                             f"runs code; {FORMAT_1_WAY_OUT}")
        raise ValueError("not a spool file (no Stratacrawl spool header)")
    try:
        doc = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data[len(MAGIC):]),
                              timestamp=3, strict_map_key=False)
    except Exception as e:   # whatever the bytes make the decoders raise
        raise ValueError(f"truncated or corrupt ({type(e).__name__}: {e})") from None
    if not isinstance(doc, dict):
        raise ValueError("corrupt contents (not a map)")
    if doc.get("format") != FORMAT:
        raise ValueError(f"unknown spool format {doc.get('format')!r} (this version reads "
                         f"format {FORMAT})")
    try:
        return str(doc["owner"]), [_fetch(f) for f in doc["items"]]
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"corrupt contents ({type(e).__name__}: {e})") from None


def _fetch(f: dict[str, Any]) -> StagedFetch:
    task_id, state, *rest = f["outcome"]
    f["outcome"] = Outcome(task_id, TaskState(state), *rest)
    f["row"] = tuple(f["row"]) if f["row"] is not None else None
    return StagedFetch(**f)


class Spool:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def of_state(cls, state_path: Path) -> Spool:
        """This host's spool: ``<state>/spool`` (each host drains its own)."""
        return cls(state_path / "spool")

    @property
    def damaged_folder(self) -> Path:
        return self.folder / DAMAGED

    def write(self, owner: str, items: Sequence[StagedFetch]) -> Path:
        """The batch as a file, durable when this returns; on any failure (a full disk)
        nothing is left behind and the error is raised."""
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.batch"
        payload = encode(owner, items)
        tmp = self.folder / (name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
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
        """A file's (owner, fetches); ValueError naming the file and what is wrong."""
        try:
            return decode(path.read_bytes())
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    def set_aside(self, path: Path, reason: str) -> Path:
        """Move a file that cannot be read to ``damaged/``, with ``<name>.why`` beside it
        holding ``reason``; returns where it now is."""
        self.damaged_folder.mkdir(parents=True, exist_ok=True)
        moved = self.damaged_folder / path.name
        (self.damaged_folder / (path.name + ".why")).write_text(reason + "\n")
        path.replace(moved)
        return moved

    def remove_stale_tmp(self) -> list[str]:
        """Delete ``.tmp`` files older than :data:`STALE_TMP_S` (writes whose process died
        before the rename: never durable, never acknowledged); returns their names."""
        if not self.folder.exists():
            return []
        removed = []
        for tmp in self.folder.glob("*.tmp"):
            try:
                if time.time() - tmp.stat().st_mtime > STALE_TMP_S:
                    tmp.unlink()
                    removed.append(tmp.name)
            except FileNotFoundError:
                pass
        return removed

    def pending(self) -> int:
        return len(self.files())
