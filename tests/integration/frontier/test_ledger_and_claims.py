"""Ledger, hot queues and claims against real PostgreSQL and Redis: every test over a
single Redis and over the three-node Redis Cluster (the hot tier's contract)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import random
import time
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratacrawl.cold.tasks import URGENT, NewTask, Outcome, TaskState
from stratacrawl.frontier.frontier import MIN_WINDOW
from stratacrawl.urls import fingerprint
from stratacrawl.wiring import Components

pytestmark = pytest.mark.integration


@pytest.fixture
def comps(hot_comps: Components) -> Components:
    return hot_comps


def tasks(n: int, source: str = "s1", priority: int = 5, kind: str = "item") -> list[NewTask]:
    urls = [f"http://example.test/{source}/{i}" for i in range(n)]
    return [NewTask(source, u, fingerprint(u), kind, priority) for u in urls]


async def state_counts(c: Components) -> dict[str, int]:
    return (await c.ledger.counts()).get("s1", {})


async def test_enqueue_is_idempotent_and_records_url_state(comps: Components) -> None:
    assert await comps.frontier.add(tasks(50)) == 50
    assert await comps.frontier.add(tasks(60)) == 10
    assert await state_counts(comps) == {"PENDING": 60}
    async with comps.pool.connection() as conn:
        n = await (await conn.execute("SELECT count(*) FROM url_state")).fetchone()
    assert n == (60,)


async def test_claims_go_by_priority_and_lease(comps: Components) -> None:
    await comps.frontier.add(tasks(30))
    urgent = "http://example.test/urgent"
    await comps.frontier.add([NewTask("s1", urgent, fingerprint(urgent), "item", URGENT)],
                             on_conflict="urgent")
    batch = await comps.frontier.claim("s1", 10, "w1")
    assert len(batch.tasks) == 10
    assert batch.tasks[0].url == "http://example.test/urgent"
    assert all(t.lease_owner == "w1" and t.attempts == 1 for t in batch.tasks)
    assert await state_counts(comps) == {"PENDING": 21, "LEASED": 10}
    assert await comps.hot_queue.in_flight("s1") == 10


async def test_a_claim_says_when_it_took_every_task_due(comps: Components) -> None:
    """A claim that took all of a source's due work says so (the worker then leaves the
    source alone for a moment instead of claiming nothing right after)."""
    await comps.frontier.add(tasks(30))
    first = await comps.frontier.claim("s1", 10, "w1")
    assert len(first.tasks) == 10 and not first.took_all_due   # 20 more are due
    rest = await comps.frontier.claim("s1", 25, "w1")
    assert len(rest.tasks) == 20 and rest.took_all_due
    assert not (await comps.frontier.claim("s1", 25, "w1")).tasks
    # more work than the window holds: a claim of all the window has is not all there is
    await comps.frontier.add(tasks(comps.hot_queue.limit + 40, source="s2"))
    whole = await comps.frontier.claim("s2", comps.hot_queue.limit + 40, "w1")
    assert 0 < len(whole.tasks) < comps.hot_queue.limit + 40 and not whole.took_all_due


async def test_completion_is_guarded_by_the_lease(comps: Components) -> None:
    await comps.frontier.add(tasks(5))
    batch = await comps.frontier.claim("s1", 5, "w1")
    ids = [t.id for t in batch.tasks]
    # w2 does not hold these leases: nothing happens.
    assert await comps.frontier.complete("s1", [Outcome(i, TaskState.SUCCEEDED) for i in ids],
                                         "w2") == 0
    # Lease expiry: reclaimed to PENDING, then the stale owner cannot complete.
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s'")
        await conn.commit()
    assert await comps.frontier.reclaim() == 5
    assert await comps.frontier.complete("s1", [Outcome(i, TaskState.SUCCEEDED) for i in ids],
                                         "w1") == 0
    again = await comps.frontier.claim("s1", 5, "w2")
    assert sorted(t.id for t in again.tasks) == sorted(ids)
    assert all(t.attempts == 2 for t in again.tasks)
    assert await comps.frontier.complete(
        "s1", [Outcome(i, TaskState.SUCCEEDED, status=200) for i in ids], "w2") == 5
    assert await state_counts(comps) == {"SUCCEEDED": 5}


async def test_workers_reclaiming_at_once_share_the_expired_leases(comps: Components) -> None:
    """A dead worker's leases expire together and every live worker reclaims at once:
    each expired task goes back to PENDING exactly once, none of them waits on another's
    row locks (SKIP LOCKED) — the plain UPDATE deadlocked in the load test."""
    await comps.frontier.add(tasks(3000))
    leased = len((await comps.frontier.claim("s1", 3000, "dead")).tasks)
    assert leased >= 1000
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s'")
        await conn.commit()
    rounds = await asyncio.gather(*(comps.ledger.reclaim_expired() for _ in range(6)))
    ids = [i for got in rounds for _, i in got]
    assert len(ids) == len(set(ids)) == leased
    assert await state_counts(comps) == {"PENDING": 3000}


async def _expires(c: Components, ids: list[int]) -> list[float]:
    async with c.pool.connection() as conn:
        cur = await conn.execute("SELECT extract(epoch FROM lease_expires_at - now()) FROM tasks "
                                 "WHERE id = ANY(%s) ORDER BY id", (ids,))
        return [float(r[0]) for r in await cur.fetchall()]


@pytest.mark.slow
async def test_lease_upkeep_renews_while_reclaimed_tasks_are_requeued(
        comps: Components, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reclaim's way back into the hot windows (a ledger read per source: for a dead
    worker of a 200-source load test, a minute on a busy pool) runs beside the lease
    upkeep, not in it: renewals go on, and the living run keeps its leases. Inline, it
    held the upkeep for the minute and the living workers lost thousands of fetched
    pages to each other's reclaims."""
    from stratacrawl.fetch.leases import keep_leases

    comps.frontier.lease = timedelta(seconds=1.5)
    await comps.frontier.add(tasks(6))
    await comps.frontier.add(tasks(4, source="s2"))
    mine = await comps.frontier.claim("s1", 6, "w1~live")
    theirs = await comps.frontier.claim("s2", 4, "w0~gone")  # never renewed
    assert len(mine.tasks) == 6 and len(theirs.tasks) == 4
    requeued = asyncio.Event()
    requeue = comps.frontier.requeue

    async def slow_requeue(sources: set[str], ledger: object = None) -> None:
        await asyncio.sleep(4.0)   # each ledger read waiting for a busy pool
        await requeue(sources, ledger)  # type: ignore[arg-type]
        requeued.set()

    monkeypatch.setattr(comps.frontier, "requeue", slow_requeue)
    stop = asyncio.Event()
    upkeep = asyncio.create_task(keep_leases(comps.frontier, comps.upkeep_stores,
                                             "w1~live", stop))
    try:
        await asyncio.sleep(5.0)   # w0's leases expire at 1.5 s; the requeue lasts until ~6
        assert not requeued.is_set()
        # Another process's reclaim now: w1 renewed all along, so nothing of it is taken.
        assert await comps.frontier.release_expired() == (set(), 0)
        async with comps.pool.connection() as conn:
            rows = await (await conn.execute(
                "SELECT source_id, state, lease_owner FROM tasks ORDER BY id")).fetchall()
        assert sorted(set(rows)) == [("s1", "LEASED", "w1~live"), ("s2", "PENDING", None)]
        await asyncio.wait_for(requeued.wait(), 5.0)
        again = await comps.frontier.claim("s2", 4, "w2")  # back in s2's window
        assert sorted(t.id for t in again.tasks) == sorted(t.id for t in theirs.tasks)
    finally:
        stop.set()
        await upkeep


async def test_held_leases_are_renewed_until_finished_and_only_then_reclaimable(
        comps: Components) -> None:
    comps.frontier.lease = timedelta(seconds=30)
    await comps.frontier.add(tasks(6))
    batch = await comps.frontier.claim("s1", 6, "w1")
    ids = sorted(t.id for t in batch.tasks)
    assert comps.frontier.held("w1") == 6
    # The batch's leases are nearly out; renewal pushes them a lease time ahead (ledger
    # and hot lease set), so a reclaim in any process leaves them with w1.
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() + interval '1 s'")
    assert await comps.frontier.renew("w1") == (6, 0)
    assert all(25 < s <= 30 for s in await _expires(comps, ids))
    hot = await comps.redis.zrange("sc:{s1}:leased", 0, -1, withscores=True)
    assert len(hot) == 6 and min(score for _, score in hot) > time.time() + 25
    assert await comps.frontier.reclaim() == 0
    # Three finish: no longer renewed. Two are lost while w1 stalled (expired, reclaimed,
    # claimed by w2): renewal tells and forgets them, and leaves w2's lease alone.
    await comps.frontier.complete("s1", [Outcome(i, TaskState.SUCCEEDED) for i in ids[:3]], "w1")
    assert comps.frontier.held("w1") == 3
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s' "
                           "WHERE id = ANY(%s)", (ids[3:5],))
    assert await comps.frontier.reclaim() == 2
    taken = await comps.frontier.claim("s1", 6, "w2")
    assert sorted(t.id for t in taken.tasks) == ids[3:5]
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() + interval '1 s' "
                           "WHERE id = ANY(%s)", (ids[3:5],))
    assert await comps.frontier.renew("w1") == (1, 2)
    assert comps.frontier.held("w1") == 1
    assert all(s <= 1 for s in await _expires(comps, ids[3:5]))  # w2's, untouched by w1
    assert await comps.frontier.renew("nobody") == (0, 0)


async def test_level2_delay_and_not_due_tasks(comps: Components) -> None:
    await comps.frontier.add(tasks(4))
    batch = await comps.frontier.claim("s1", 4, "w1")
    assert await comps.frontier.delay(batch, "w1") == 4
    assert await state_counts(comps) == {"RETRY_WAIT": 4}
    assert (await comps.frontier.claim("s1", 4, "w1")).tasks == []  # due in 15 minutes
    async with comps.pool.connection() as conn:
        due = await (await conn.execute("SELECT min(due_at) FROM tasks")).fetchone()
    assert due[0] > datetime.now(UTC) + timedelta(minutes=14)


async def test_redis_loss_loses_nothing(comps: Components) -> None:
    await comps.frontier.add(tasks(40))
    first = await comps.frontier.claim("s1", 10, "w1")
    await comps.redis.flushdb()
    rest = []
    while batch := (await comps.frontier.claim("s1", 7, "w2")).tasks:
        rest += batch
    ids = [t.id for t in first.tasks] + [t.id for t in rest]
    assert len(ids) == len(set(ids)) == 40


async def test_hot_window_stays_bounded(comps: Components) -> None:
    comps.hot_queue.window = 50
    await comps.frontier.add(tasks(2000))
    await comps.frontier.claim("s1", 10, "w1")
    assert await comps.hot_queue.size("s1") <= 50


async def test_windows_share_one_budget_however_many_sources_have_work(
        comps: Components) -> None:
    """Redis holds about ``window_budget`` ids in all, not sources x window: with 40
    sources each window is budget / 40 (never below MIN_WINDOW); claims still drain all."""
    f = comps.frontier
    f.window_budget, comps.hot_queue.window = 4000, 2000
    for s in range(40):
        await f.add(tasks(300, source=f"w{s}"))
    await comps.redis.flushdb()                  # as after a Redis loss: refilled from cold
    assert await comps.recovery().rebuild_queues() == 40 * 100
    assert comps.hot_queue.limit == 100
    sizes = [await comps.hot_queue.size(f"w{s}") for s in range(40)]
    assert sizes == [100] * 40
    f.fit_window(1000)                           # many more sources: the floor holds
    assert comps.hot_queue.limit == MIN_WINDOW
    f.fit_window(1)                              # one source: the configured window
    assert comps.hot_queue.limit == 2000
    claimed = []
    while batch := (await f.claim("w7", 64, "w1")).tasks:
        claimed += [t.id for t in batch]
    assert len(claimed) == len(set(claimed)) == 300


async def test_admit_fills_the_window_best_first_and_counts_what_did_not_fit(
        comps: Components) -> None:
    q = comps.hot_queue
    q.window = 3000
    await q.push("s1", [(i, 0, 100.0) for i in range(1, 501)])   # 500 already waiting
    items = [(i, 5, 200.0 + i) for i in range(1000, 4000)]        # best first
    assert await q.admit("s1", items) == 500                      # 2,500 fit, in chunks
    assert await q.size("s1") == 3000
    ids, _ = await q.pop("s1", 3000, 60)
    assert set(ids) >= {i for i, _, _ in items[:2500]} and 3500 not in ids
    assert await q.admit("s1", []) == 0


async def test_new_work_enters_a_window_with_room_without_ledger_reads(
        comps: Components) -> None:
    comps.hot_queue.window = 100
    await comps.frontier.add(tasks(30))
    first = await comps.frontier.claim("s1", 10, "w1")   # refills: the ledger had 30
    assert len(first.tasks) == 10
    reads = 0
    ready_page = comps.ledger.ready_page

    async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return await ready_page(*args, **kwargs)

    comps.ledger.ready_page = counted  # type: ignore[method-assign]
    await comps.frontier.add(tasks(70)[30:])             # 40 new links: room for all
    assert await comps.hot_queue.size("s1") == 60
    claimed = {t.id for t in first.tasks}
    for _ in range(6):
        batch = await comps.frontier.claim("s1", 10, "w1")
        assert len(batch.tasks) == 10
        claimed |= {t.id for t in batch.tasks}
    assert reads == 0 and len(claimed) == 70
    await comps.frontier.add(tasks(300)[70:])            # 230 more than the window holds
    assert await comps.hot_queue.size("s1") == 100
    rest = set()
    while batch := (await comps.frontier.claim("s1", 50, "w1")).tasks:
        rest |= {t.id for t in batch}
    assert reads >= 1 and len(rest) == 230 and not rest & claimed   # the ledger had the rest


async def test_rearm_and_requeue(comps: Components) -> None:
    seed = NewTask("s1", "http://example.test/", fingerprint("http://example.test/"), "seed")
    await comps.frontier.add([seed])
    batch = await comps.frontier.claim("s1", 1, "w1")
    await comps.frontier.complete("s1", [Outcome(batch.tasks[0].id, TaskState.SUCCEEDED)], "w1")
    assert await comps.ledger.rearm("s1", timedelta(hours=1)) == 0
    assert await comps.ledger.rearm("s1", timedelta(0)) == 1
    assert await state_counts(comps) == {"PENDING": 1}


async def test_retirement_drops_finished_items_only_and_they_can_be_queued_again(
        comps: Components) -> None:
    """Finished item tasks older than the cutoff leave the ledger with their keys; a list,
    a pending item and a freshly finished one stay; the URL state stays; the same URL
    found again is a new task."""
    items = tasks(6)
    listing = NewTask("s1", "http://example.test/list", fingerprint("http://example.test/list"),
                      "list")
    await comps.frontier.add([*items, listing])
    batch = await comps.frontier.claim("s1", 7, "w1")
    by_url = {t.url: t.id for t in batch.tasks}
    done = [Outcome(by_url[t.url], TaskState.SUCCEEDED, status=200) for t in items[:4]]
    done += [Outcome(by_url[items[4].url], TaskState.FAILED, status=404),
             Outcome(by_url[listing.url], TaskState.SUCCEEDED, status=200)]
    assert await comps.frontier.complete("s1", done, "w1") == 6
    async with comps.pool.connection() as conn:   # three of the items finished long ago
        await conn.execute("UPDATE tasks SET finished_at = now() - interval '9 days' "
                           "WHERE id = ANY(%s) OR url = %s",
                           ([by_url[t.url] for t in items[:2]] + [by_url[items[4].url]],
                            listing.url))
    assert await comps.ledger.retire(datetime.now(UTC) - timedelta(days=7), batch=2) == 3
    assert await comps.ledger.retire(datetime.now(UTC) - timedelta(days=7)) == 0
    assert await state_counts(comps) == {"SUCCEEDED": 3, "LEASED": 1}
    async with comps.pool.connection() as conn:
        keys = (await (await conn.execute("SELECT count(*) FROM task_keys")).fetchone())[0]
        known = (await (await conn.execute("SELECT count(*) FROM url_state")).fetchone())[0]
    assert (keys, known) == (4, 7)
    assert await comps.ledger.queued("s1", [t.url_hash for t in items]) == {
        t.url_hash for t in items[2:4] + items[5:]}
    assert await comps.frontier.add(items[:1]) == 1     # found again: queued anew
    assert await state_counts(comps) == {"SUCCEEDED": 3, "LEASED": 1, "PENDING": 1}
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["claim", "done", "fail", "crash", "expire",
                                               "flush"]),
                              st.integers(0, 2), st.integers(1, 6)), min_size=5, max_size=40))
async def test_state_machine_never_loses_or_double_leases(comps: Components, ops) -> None:
    async with comps.pool.connection() as conn:
        await conn.execute("TRUNCATE tasks, task_keys, url_state")
        await conn.commit()
    await comps.redis.flushdb()
    await comps.frontier.add(tasks(25))
    held: dict[str, set[int]] = {"w0": set(), "w1": set(), "w2": set()}
    finished: set[int] = set()
    for op, w, n in ops:
        worker = f"w{w}"
        if op == "claim":
            got = {t.id for t in (await comps.frontier.claim("s1", n, worker)).tasks}
            for other, ids in held.items():
                assert not (got & ids), f"{worker} got tasks leased to {other}"
            assert not (got & finished)
            held[worker] |= got
        elif op in ("done", "fail") and held[worker]:
            ids = random.Random(n).sample(sorted(held[worker]), min(n, len(held[worker])))
            state = TaskState.SUCCEEDED if op == "done" else TaskState.FAILED
            applied = await comps.frontier.complete("s1", [Outcome(i, state) for i in ids], worker)
            assert applied == len(ids)
            held[worker] -= set(ids)
            finished |= set(ids)
        elif op == "crash":  # the worker vanishes; its leases run out
            async with comps.pool.connection() as conn:
                await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s' "
                                   "WHERE lease_owner = %s", (worker,))
                await conn.commit()
            held[worker] = set()
        elif op == "expire":
            await comps.frontier.reclaim()
        elif op == "flush":
            await comps.redis.flushdb()
    # Drain: everything not finished is claimable again and is finished exactly once.
    async with comps.pool.connection() as conn:
        await conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 s' "
                           "WHERE state IN ('LEASED', 'FETCHING')")
        await conn.commit()
    await comps.frontier.reclaim()
    while batch := (await comps.frontier.claim("s1", 10, "drain")).tasks:
        ids = {t.id for t in batch}
        assert not (ids & finished)
        await comps.frontier.complete("s1", [Outcome(i, TaskState.SUCCEEDED) for i in ids],
                                      "drain")
        finished |= ids
    counts = await state_counts(comps)
    assert sum(counts.values()) == 25 and len(finished) == 25
    assert set(counts) <= {"SUCCEEDED", "FAILED"}


def _claimer(db_url: str, redis_url: str, cluster: bool,
             q: mp.Queue, ready: mp.Queue, go: object) -> None:  # type: ignore[type-arg]
    from stratacrawl.cold.ledger import Ledger
    from stratacrawl.cold.pool import make_pool
    from stratacrawl.frontier.frontier import Frontier
    from stratacrawl.hot.client import connect
    from stratacrawl.hot.queue import HotQueue

    async def main() -> list[int]:
        got: list[int] = []
        async with connect(redis_url, cluster=cluster, max_connections=8, pool_wait_s=30,
                           connect_timeout_s=10) as r, make_pool(db_url) as pool:
            f = Frontier(ledger=Ledger(pool=pool), hot=HotQueue(redis=r, window=300))
            await r.ping()
            ready.put(True)
            await asyncio.to_thread(go.wait, 60)  # type: ignore[attr-defined]
            while batch := (await f.claim("s1", 25, f"p{mp.current_process().pid}")).tasks:
                got += [t.id for t in batch]
        return got

    q.put(asyncio.run(main()))


@pytest.mark.slow
async def test_concurrent_claimer_processes_never_share_a_task(comps: Components) -> None:
    await comps.frontier.add(tasks(3000))
    ctx = mp.get_context("spawn")
    q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_claimer, args=(
        comps.runtime.database_url, comps.runtime.endpoints.redis_url,
        comps.settings.redis_cluster, q, ready, go)) for _ in range(4)]
    for p in procs:
        p.start()
    for _ in procs:  # all connected: start together, so the work really can be shared
        ready.get(timeout=120)
    go.set()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    claimed = [i for r in results for i in r]
    assert len(claimed) == len(set(claimed)) == 3000
    assert sum(1 for r in results if r) >= 2  # the work really was shared
