"""The spool: durable files, idempotent replays."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stratacrawl.cold.staging import StagedFetch, make_row
from stratacrawl.cold.tasks import NewTask, TaskState
from stratacrawl.staging.loader import drain
from stratacrawl.staging.spool import Spool
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration


async def test_spooled_batches_land_once_however_often_replayed(comps: Components,
                                                                tmp_path: Path) -> None:
    urls = [f"http://127.0.0.1:9/item/{i}" for i in range(5)]
    await comps.frontier.add([NewTask("s1", u, fingerprint(u)) for u in urls])
    batch = await comps.frontier.claim("s1", 5, "w1")
    now = datetime.now(UTC)
    items = [StagedFetch(
        row=make_row(fetched_at=now, fetch_key=f"{t.id}:1:x", source_id="s1", task_id=t.id,
                     attempt=1, url=t.url, final_url=t.url, status=200, headers={},
                     content_type="text/html", body=b"<html>hi</html>", elapsed_ms=1.0,
                     trace_id="x", worker="w1", kind="item", success=True),
        outcome=(t.id, TaskState.SUCCEEDED, 200, None, None), url_hash=t.url_hash,
        content_hash="c", etag=None, last_modified=None, succeeded=True, fetched_at=now,
        status=200, body_bytes=15) for t in batch.tasks]
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
