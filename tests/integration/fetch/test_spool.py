"""The spool: durable files, idempotent replays."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from stratacrawl.cold.tasks import NewTask
from stratacrawl.staging.loader import drain
from stratacrawl.staging.spool import MAGIC, Spool
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


class _Payload:
    """What an attacker's pickle would run on load: it creates a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (open, (str(self.marker), "w"))


def _damaged_kinds(tmp_path: Path, good: bytes) -> dict[str, bytes]:
    import pickle

    import zstandard
    marker = tmp_path / "pwned"
    return {
        "random.batch": bytes(random.Random(7).getrandbits(8) for _ in range(5000)),
        "empty.batch": b"",
        "truncated.batch": good[: len(good) // 2],
        "header.batch": MAGIC[:-3] + b"XYZ" + good[len(MAGIC):],
        "pickle.batch": zstandard.ZstdCompressor().compress(
            pickle.dumps({"format": 1, "owner": "w1", "items": [_Payload(marker)]})),
    }


async def test_damaged_spool_files_are_named_and_set_aside_and_the_rest_loads(
        comps: Components, tmp_path: Path) -> None:
    """Five kinds of damaged file (random bytes, empty, truncated, a bad header, a
    format-1 pickle whose payload would create a file): none is deserialized, each is
    named with what is wrong and moved to damaged/ with a .why beside it, the good file
    still lands, and nothing is left pending."""
    urls = [f"http://127.0.0.1:9/item/{i}" for i in range(3)]
    await comps.frontier.add([NewTask("s1", u, fingerprint(u)) for u in urls])
    batch = await comps.frontier.claim("s1", 3, "w1")
    spool = Spool(tmp_path / "spool")
    good = spool.write("w1", staged_fetches(batch.tasks))
    kinds = _damaged_kinds(tmp_path, good.read_bytes())
    for name, data in kinds.items():
        (spool.folder / name).write_bytes(data)
    (spool.folder / "old.batch.tmp").write_bytes(b"half a write")
    os.utime(spool.folder / "old.batch.tmp", (0, 0))
    report = await drain(spool, comps.pool)
    assert (report.files, report.rows) == (1, 3)
    why = {d.file: d.reason for d in report.damaged}
    assert set(why) == set(kinds)
    assert why["empty.batch"] == "empty file"
    assert why["random.batch"].startswith("not a spool file")
    assert why["header.batch"].startswith("not a spool file")
    assert why["truncated.batch"].startswith("truncated or corrupt")
    assert "format-1" in why["pickle.batch"] and "never loaded" in why["pickle.batch"]
    assert not (tmp_path / "pwned").exists()     # the pickle's code never ran
    for name in kinds:
        assert (spool.damaged_folder / name).exists()
        assert (spool.damaged_folder / f"{name}.why").read_text().strip() == why[name]
    assert spool.pending() == 0 and report.stale_tmp == ["old.batch.tmp"]
    assert "damaged file(s) set aside" in report.summary()
    assert (await comps.ledger.counts())["s1"] == {"SUCCEEDED": 3}


def test_spool_files_are_data_and_other_formats_are_refused(tmp_path: Path) -> None:
    """Format 2 is MessagePack (no pickle: reading a file runs no code of its); every
    field comes back as written, the outcome as an Outcome; a format-1 file (pickle)
    and an unknown format are refused, never loaded."""
    import pickle
    from types import SimpleNamespace

    import msgpack
    import zstandard

    from stratacrawl.cold.tasks import Outcome, TaskState
    from stratacrawl.staging.spool import decode

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
    with pytest.raises(ValueError, match=r"format-1 spool file.*never loaded"):
        decode(old)
    with pytest.raises(ValueError, match="unknown spool format 3"):
        decode(MAGIC + zstandard.ZstdCompressor().compress(msgpack.packb({"format": 3})))


@pytest.mark.slow
async def test_a_damaged_spool_file_never_holds_up_an_idle_crawl(comps: Components) -> None:
    """A crawl whose spool holds a damaged file ends idle like any other (the file set
    aside and named in its report), instead of waiting for it to land."""
    from stratacrawl.crawl import crawl
    from stratacrawl.sim import SimulatorThread
    from tests.support.hosts import hosts
    from tests.support.sites import small_site, sources_for

    spool = comps.spool
    spool.folder.mkdir(parents=True, exist_ok=True)
    (spool.folder / "junk.batch").write_bytes(bytes(random.Random(3).getrandbits(8)
                                                    for _ in range(5000)))
    specs = small_site(1, hosts(), backlog=5)
    with SimulatorThread(specs):
        report = await crawl(comps, sources_for(specs), until_idle=True, seconds=60,
                             flush_s=0.2)
    assert report.seconds < 55 and report.fetched > 0   # ended idle, not at the limit
    damaged = report.to_json()["spool_damaged"]
    assert [d["file"] for d in damaged] == ["junk.batch"]
    assert spool.pending() == 0 and (spool.damaged_folder / "junk.batch").exists()
