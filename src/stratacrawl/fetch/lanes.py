"""One batch's lanes: each holds a slot of the source and fetches the batch's next task
until none is left, then gives its slot up at once — a batch waiting on its slowest
request holds that request's slot, no other. More lanes start while tasks wait and the
source has free slots: looked at on start, then at most every ``GROW_EVERY_S``, and
whenever a slot of the source is given up (the worker lends it to a batch with tasks
waiting before it claims more work with it)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Protocol

from stratacrawl.cold.tasks import Batch, ClaimedTask
from stratacrawl.fetch.fetcher import SourceClient
from stratacrawl.fetch.recording import Fetched
from stratacrawl.hot.url_state import HotURL
from stratacrawl.sources import Source

GROW_EVERY_S = 0.5   # how often a batch with tasks waiting looks for more free slots


class LaneOwner(Protocol):
    """What lanes need of the worker running them."""

    @property
    def stopping(self) -> bool: ...

    async def more_slots(self, source: Source, batch: Batch, wanted: int) -> list[str]: ...

    async def fetch_one(self, source: Source, client: SourceClient, task: ClaimedTask,
                        hot: HotURL | None, fetched: Fetched) -> None: ...

    async def slot_done(self, source_id: str, holder: str) -> None: ...


class Lanes:
    """The lanes of ``batch`` (a class, not closures: closures that start each other form
    a reference cycle, and a cycle holding a batch's staged pages waits for the cyclic
    collector — a crawl's memory grew by its pages' bodies)."""

    def __init__(self, owner: LaneOwner, source: Source, batch: Batch,
                 client: SourceClient, holder: str,
                 todo: deque[tuple[ClaimedTask, HotURL | None]], fetched: Fetched) -> None:
        self.owner, self.source, self.batch, self.client = owner, source, batch, client
        self.holder = holder   # the batch's own slot: released by whoever runs the batch
        self.todo, self.fetched = todo, fetched
        self.running: set[asyncio.Task[None]] = set()
        self.failed: list[Exception] = []
        self.grow_at = 0.0
        self.own_slot_given_up = False   # see ``lane``

    async def run(self) -> None:
        self.running.add(asyncio.create_task(self.lane(self.holder)))
        try:
            await self.grow()
            while self.running:
                done, _ = await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
                self.running.difference_update(done)
        finally:  # cancelled (the drain time is up): the lanes with it
            for lane in self.running:
                lane.cancel()
            await asyncio.gather(*self.running, return_exceptions=True)
            self.running.clear()
        if self.failed:
            raise self.failed[0]

    def lanes_wanted(self) -> int:
        """Lanes this batch could start now: tasks wait that no running lane will take
        next (none once a lane failed or the worker stops)."""
        if self.failed or self.owner.stopping:
            return 0
        return min(len(self.todo), self.source.concurrency) - len(self.running)

    async def grow(self, now: bool = False) -> None:
        """More lanes while tasks wait and the source has free slots (``now``: a slot of
        the source was just freed, so without waiting for ``GROW_EVERY_S``)."""
        wanted = self.lanes_wanted()
        if wanted <= 0 or (not now and time.monotonic() < self.grow_at):
            return
        self.grow_at = time.monotonic() + GROW_EVERY_S
        for extra in await self.owner.more_slots(self.source, self.batch, wanted):
            self.running.add(asyncio.create_task(self.lane(extra)))

    async def lane(self, holder: str) -> None:
        owner = self.owner
        try:
            while self.todo and not owner.stopping and not self.failed:
                task, hot = self.todo.popleft()
                await owner.fetch_one(self.source, self.client, task, hot, self.fetched)
                await self.grow()
        except Exception as e:  # the other lanes stop taking tasks; raised by run()
            self.failed.append(e)
        finally:
            # Every lane gives its slot up when it has nothing left, the batch's own one
            # too: kept until the batch's slowest lane ended, it stood idle up to a
            # request's time (the batch then does not give it back again).
            if holder == self.holder:
                self.own_slot_given_up = True
            await owner.slot_done(self.source.id, holder)
