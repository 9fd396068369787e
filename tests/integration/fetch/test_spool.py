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
from tests.helpers import staged_fetches

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
