"""The spool: durable files, idempotent replays."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stratacrawl.cold.tasks import NewTask
from stratacrawl.staging.loader import drain
from stratacrawl.staging.spool import Spool
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components
from tests.support.processes import staged_fetches

pytestmark = pytest.mark.integration


async def test_spooled_batches_land_once_however_often_replayed(comps: Components,
                                                                tmp_path: Path) -> None:
    urls = [f"http://127.0.0.1:9/item/{i}" for i in range(5)]
    await comps.frontier.add([NewTask("s1", u, fingerprint(u)) for u in urls])
    batch = await comps.frontier.claim("s1", 5, "w1")
    items = staged_fetches(batch.tasks)
    spool = Spool(tmp_path / "spool")
    path = spool.write("w1", items)
    assert path.exists() and not list(spool.folder.glob("*.tmp"))
    keep = tmp_path / "copy.batch"
    shutil.copy(path, keep)
    first = await drain(spool, comps.pool)
    assert (first.files, first.rows, first.inserted) == (1, 5, 5)
    assert spool.pending() == 0
    shutil.copy(keep, spool.folder / keep.name)       # the same batch again (a crash replay)
    second = await drain(spool, comps.pool)
    assert (second.files, second.inserted) == (1, 0)
    counts = await comps.ledger.counts()
    assert counts["s1"] == {"SUCCEEDED": 5}
    (spool.folder / "broken.batch").write_bytes(b"not a spool file")
    third = await drain(spool, comps.pool)
    assert third.failed and "broken.batch" in third.failed[0]
    assert (spool.folder / "broken.batch").exists()   # kept for inspection


def test_spool_files_are_data_and_files_of_the_previous_format_still_read(
        tmp_path: Path) -> None:
    """Format 2 is MessagePack (no pickle: reading a file runs no code of its); every
    field comes back as written, the outcome as an Outcome; a format-1 file (pickle,
    written before the upgrade) still reads."""
    import pickle
    from types import SimpleNamespace

    import msgpack
    import zstandard

    from stratacrawl.cold.tasks import Outcome, TaskState
    from stratacrawl.staging.spool import MAGIC, decode

    tasks = [SimpleNamespace(id=i, source_id="s1", url=f"http://a.test/{i}", url_hash=f"{i:032x}")
             for i in range(3)]
    items = staged_fetches(tasks)
    items[1].outcome = Outcome(1, TaskState.RETRY_WAIT, 503, "http-503",
                               items[1].fetched_at, 60.0, False)
    items[2].row = None
    items[2].outcome = Outcome(*items[2].outcome)
    spool = Spool(tmp_path / "spool")
    path = spool.write("w9", items)
    data = path.read_bytes()
    assert data.startswith(MAGIC) and b"pickle" not in data
    doc = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data[len(MAGIC):]),
                          timestamp=3)
    assert doc["format"] == 2 and doc["items"][1]["outcome"][1] == "RETRY_WAIT"
    owner, back = spool.read(path)
    assert owner == "w9" and back[1] == items[1] and back[2] == items[2]
    assert back[0].outcome == Outcome(*items[0].outcome) and back[0].row == items[0].row
    assert isinstance(back[1].outcome, Outcome) and back[1].outcome.state is TaskState.RETRY_WAIT
    old = zstandard.ZstdCompressor().compress(
        pickle.dumps({"format": 1, "owner": "w1", "items": items}))
    assert decode(old) == ("w1", items)
    with pytest.raises(ValueError, match="unknown spool format 3"):
        decode(MAGIC + zstandard.ZstdCompressor().compress(msgpack.packb({"format": 3})))
