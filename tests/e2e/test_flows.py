"""The flows as a data engineer sees them in the Prefect UI: each pipeline step a task run
with its own state, transient failures retried, configuration errors not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.testing.utilities import prefect_test_harness

from flows.common import step
from flows.retries import is_transient
from stratacrawl.errors import ConfigError, ServiceUnavailable
from stratacrawl.settings import Settings
from tests.support.hosts import hosts

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def prefect_api() -> Iterator[None]:
    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def flow_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The flows read their tiers from the environment (no blocks registered here)."""
    for key, value in {"STRATACRAWL_REDIS_URL": settings.redis_url,
                       "STRATACRAWL_DATABASE_URL": settings.database_url,
                       "STRATACRAWL_ELASTICSEARCH_URL": settings.elasticsearch_url,
                       "STRATACRAWL_ES_PLAIN_JSON": str(settings.es_plain_json).lower(),
                       "STRATACRAWL_ES_INDEX_PREFIX": settings.es_index_prefix,
                       "STRATACRAWL_STATE_DIR": str(settings.state_dir)}.items():
        monkeypatch.setenv(key, str(value))
    return settings


async def _task_runs(state: Any, names: set[str] | None = None,
                     at_least: int = 0) -> list[tuple[str, str, int]]:
    """(name, final state, run count) of each task run of a flow run, in start order. Task
    runs and their states reach the API in the background: wait until every run is final,
    (with ``names``) the runs of those names are there and at least ``at_least`` runs are."""
    flow_run_id = state.state_details.flow_run_id
    deadline = time.monotonic() + 30
    async with get_client() as client:
        while True:
            runs = await client.read_task_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[flow_run_id])))
            settled = (len(runs) >= at_least
                       and all(r.state and r.state.is_final() for r in runs)
                       and (names is None or names <= {r.name for r in runs}))
            if settled or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    runs.sort(key=lambda r: r.start_time or r.expected_start_time)
    return [(r.name, r.state.type.value if r.state else "?", r.run_count) for r in runs]


@pytest.mark.parametrize(("module", "name", "at_least"), [
    ("flows.recovery", "recovery", {"reclaim expired leases", "rebuild hot ready queues",
                                    "rebuild Bloom filter"}),
    ("flows.tier_sinking", "tier_sinking", {"backfill demotion", "staging retention",
                                            "hot eviction"}),
    ("flows.compensation", "compensation", {"reclaim expired leases",
                                            "re-schedule overdue tasks"}),
])
@pytest.mark.slow
async def test_maintenance_flows_show_each_step_as_a_task_run(
        prefect_api: None, flow_env: Settings, module: str, name: str,
        at_least: set[str]) -> None:
    import importlib

    fn = getattr(importlib.import_module(module), name)
    state = await fn(return_state=True)
    assert state.is_completed(), state.message
    runs = await _task_runs(state, names=at_least, at_least=3)
    assert len(runs) >= 3, runs
    assert {n for n, _, _ in runs} >= at_least, runs
    assert {s for _, s, _ in runs} == {"COMPLETED"}, runs


@pytest.mark.slow
async def test_a_transient_failure_is_retried_and_the_run_completes(prefect_api: None) -> None:
    calls = {"n": 0}

    async def flaky() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionResetError("connection reset by peer")
        return "done"

    @flow(name="transient-once")
    async def transient_once() -> str:
        return await step("flaky step", flaky)

    state = await transient_once(return_state=True)
    assert state.is_completed() and await state.result() == "done"
    assert calls["n"] == 2
    ((_, final, run_count),) = await _task_runs(state, names={"flaky step"})
    assert final == "COMPLETED" and run_count == 2


@pytest.mark.slow   # (a Prefect API for the session: ~10 s before the first flow runs)
async def test_a_configuration_error_fails_at_once(prefect_api: None) -> None:
    calls = {"n": 0}

    async def misconfigured() -> None:
        calls["n"] += 1
        raise ConfigError("sources.yaml: source 'nope' is not defined")

    @flow(name="config-error")
    async def config_error() -> None:
        await step("misconfigured step", misconfigured)

    state = await config_error(return_state=True)
    assert state.is_failed() and "source 'nope'" in (state.message or "")
    assert calls["n"] == 1
    ((_, final, run_count),) = await _task_runs(state, names={"misconfigured step"})
    assert final == "FAILED" and run_count == 1


@pytest.mark.parametrize(("exc", "transient"), [
    (ConnectionRefusedError(), True),
    (ServiceUnavailable("PostgreSQL", None, "connection refused"), True),
    (psycopg.errors.DeadlockDetected(), True),
    (ConfigError("bad setting"), False),
    (KeyError("nope"), False),
    (ValueError("bad day"), False),
])
def test_what_counts_as_transient(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = exc
    assert is_transient(wrapped) is transient


@pytest.mark.parametrize(("module", "name", "params", "named"), [
    ("flows.validation", "validation", {"source": "nope"}, "parameter source: no source 'nope'"),
    ("flows.fetch", "fetch", {"sources_file": "/nonexistent/sources.yaml"},
     "parameter sources_file (/nonexistent/sources.yaml)"),
    ("flows.cleaning", "cleaning", {"reclean_source": "nope", "reclean_day": "2026-11-30"},
     "parameter reclean_source: no source 'nope'"),
])
async def test_a_wrong_flow_parameter_fails_the_run_at_once_naming_it(
        prefect_api: None, flow_env: Settings, tmp_path: Any, module: str, name: str,
        params: dict[str, Any], named: str) -> None:
    import importlib

    sources = tmp_path / "sources.yaml"
    sources.write_text("sources:\n- id: news-1\n  seeds: [https://news.example/]\n"
                       "  allow: ['^https://news\\.example/']\n")
    fn = getattr(importlib.import_module(module), name)
    state = await fn(**{"sources_file": str(sources), **params}, return_state=True)
    assert state.is_failed()
    assert named in (state.message or ""), state.message
    assert await _task_runs(state) == []  # failed before any step ran: nothing retried


@pytest.mark.slow
async def test_demotion_waits_for_the_warm_writer_slot_another_deployment_holds(
        prefect_api: None, flow_env: Settings) -> None:
    """Demotion and the nightly sinking's backfill share a Prefect global concurrency
    limit: while one holds it (here: the test), the other's step waits."""
    from prefect.concurrency.asyncio import concurrency

    from flows.common import WARM_WRITER
    from flows.demotion import demotion

    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(WARM_WRITER, 1)
    try:
        async with concurrency(WARM_WRITER, occupy=1):
            run = asyncio.create_task(demotion(return_state=True))
            await asyncio.sleep(5)
            assert not run.done()  # its "demote to warm" step waits for the slot
        state = await asyncio.wait_for(run, 120)
        assert state.is_completed(), state.message
    finally:
        async with get_client() as client:
            await client.delete_global_concurrency_limit_by_name(WARM_WRITER)


async def test_staging_load_drains_the_spool_a_staging_outage_left(
        prefect_api: None, flow_env: Settings, comps: Any) -> None:
    """Pages a worker spooled while PostgreSQL was down land in staging and complete
    their tasks when the staging-load flow runs; the run says what it drained."""
    from flows.staging_load import staging_load
    from stratacrawl.cold.tasks import NewTask
    from stratacrawl.staging.spool import Spool
    from stratacrawl.urls import fingerprint
    from tests.support.processes import staged_fetches

    urls = [f"http://127.0.0.1:9/item/{i}" for i in range(4)]
    await comps.frontier.add([NewTask("s1", u, fingerprint(u)) for u in urls])
    batch = await comps.frontier.claim("s1", 4, "w1")
    spool = Spool.of_state(flow_env.state_path)
    spool.write("w1", staged_fetches(batch.tasks))
    state = await staging_load(return_state=True)
    assert state.is_completed(), state.message
    assert await state.result() == {"files": 1, "rows": 4, "inserted": 4, "damaged": 0}
    assert spool.pending() == 0
    assert (await comps.ledger.counts())["s1"] == {"SUCCEEDED": 4}
    assert [(n, s) for n, s, _ in await _task_runs(state, names={"drain the spool"})] == [
        ("drain the spool", "COMPLETED")]


@pytest.mark.slow
async def test_a_cancelled_fetch_run_leaves_nothing_fetching(
        prefect_api: None, flow_env: Settings, comps: Any, tmp_path: Any) -> None:
    """A Prefect cancellation of a ``fetch`` run is a SIGTERM to its process (the process
    worker sends it): the run's in-flight pages land and its other tasks go back to the
    queue before Prefect ends the run. It once left its batches FETCHING, half-landed,
    until their leases expired."""
    import os
    import signal
    import subprocess
    import sys

    import yaml
    from prefect.settings import PREFECT_API_URL

    from stratacrawl.sim import Behaviour, SimulatorThread
    from stratacrawl.sim.crawl_config import sources_document
    from tests.support.sites import small_site

    specs = small_site(2, hosts(), backlog=200,
                       behaviour=Behaviour(latency_median_ms=300.0, latency_sigma=0.3))
    with SimulatorThread(specs):
        path = tmp_path / "sources.yaml"
        path.write_text(yaml.safe_dump(sources_document(specs, rate=50.0, concurrency=6)))
        code = ("import asyncio, sys\nfrom flows.fetch import fetch\n"
                "asyncio.run(fetch(sources_file=sys.argv[1], minutes=3))")
        env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()),
               "STRATACRAWL_DRAIN_S": "3"}
        proc = subprocess.Popen([sys.executable, "-c", code, str(path)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        async def count(sql: str) -> int:
            async with comps.pool.connection() as conn:
                return int((await (await conn.execute(sql)).fetchone())[0])

        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if await count("SELECT count(*) FROM staging WHERE kind = 'item'") >= 20:
                    break
                await asyncio.sleep(0.2)
            assert await count("SELECT count(*) FROM tasks WHERE state IN "
                               "('LEASED', 'FETCHING')") > 0
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
    text = out.decode(errors="replace")
    assert "SIGTERM: stopping" in text, text[-3000:]
    assert took < 3 + 10, f"{took:.1f} s"
    assert await count("SELECT count(*) FROM tasks WHERE state IN ('LEASED', 'FETCHING')") == 0
    # every fetched page landed: each task fetched has its page staged
    assert await count("SELECT count(*) FROM tasks t WHERE t.last_status IS NOT NULL AND NOT "
                       "EXISTS (SELECT 1 FROM staging s WHERE s.task_id = t.id)") == 0
    print(f"cancelled fetch run: exit {proc.returncode} after {took:.1f} s")


@pytest.mark.slow
async def test_a_fetch_run_whose_source_fails_is_not_completed(
        prefect_api: None, flow_env: Settings, comps: Any, tmp_path: Any) -> None:
    """A source whose every request fails (its site is gone) beside a healthy one: the
    fetch run ends Failed, its message naming the source and the reason, and the healthy
    source's pages are staged all the same. Such a run once ended Completed (0 of 87
    pages ok) and the dashboard counted no failed run."""
    import yaml

    from flows.fetch import fetch
    from stratacrawl.services.embedded import free_port
    from stratacrawl.sim import SimulatorThread
    from stratacrawl.sim.crawl_config import sources_document
    from tests.support.sites import small_site

    specs = small_site(1, hosts(), backlog=20)
    gone = free_port()   # nothing listens there
    with SimulatorThread(specs):
        doc = sources_document(specs, rate=50.0, concurrency=2)
        doc["sources"].append({
            "id": "gone", "seeds": [f"http://127.0.0.1:{gone}/"], "rate": 5,
            "allow": [rf"^http://127\.0\.0\.1:{gone}/"], "allow_private_networks": True,
            "robots": "ignore", "sitemaps": False})
        path = tmp_path / "sources.yaml"
        path.write_text(yaml.safe_dump(doc))
        state = await fetch(sources_file=str(path), minutes=0.25, return_state=True)
    assert state.is_failed(), state
    assert "1 of 2 source(s) failed: gone: 0 of 1 pages ok" in (state.message or ""), \
        state.message
    assert "connect-error" in (state.message or "")
    # the task that failed is Failed in the run's graph, with the same reason
    ((name, final, runs),) = await _task_runs(state, names={"fetch loop"})
    assert (name, final, runs) == ("fetch loop", "FAILED", 1)
    async with comps.pool.connection() as conn:
        staged = (await (await conn.execute(
            "SELECT count(*) FROM staging WHERE source_id = %s AND status = 200",
            (specs[0].id,))).fetchone())[0]
    assert staged > 20


@pytest.mark.slow
async def test_a_failed_check_fails_its_source_day_task(prefect_api: None, flow_env: Settings,
                                                         tmp_path: Any) -> None:
    """A source-day that fails its checks (an empty day fails the count) is a Failed task
    in the validation run's graph, with the failed checks as its message — not a green
    task under a red run."""
    from flows.validation import validation

    sources = tmp_path / "sources.yaml"
    sources.write_text("sources:\n- id: news-1\n  seeds: [https://news.example/]\n"
                       "  allow: ['^https://news\\.example/']\n  expected_daily: 10\n")
    state = await validation(sources_file=str(sources), return_state=True)
    assert state.is_failed(), state
    runs = await _task_runs(state)
    assert [(n.split(" ")[:2], s) for n, s, _ in runs] == [(["validate", "news-1"], "FAILED")]
    async with get_client() as client:
        (run,) = await client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
    assert run.state is not None and "news-1" in (run.state.message or ""), run.state


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_a_repair_run_pauses_for_approval_and_applies_what_the_form_says(
        prefect_api: None, flow_env: Settings, comps: Any, tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a redesign the `repair` run proposes rules (a Markdown artifact), pauses for
    its typed input, and on {"approve": true} writes them into the sources file as a new
    version, re-cleans the failed pages and ends Completed saying so."""
    import yaml
    from prefect.client.schemas.filters import FlowRunFilterState, FlowRunFilterStateType
    from prefect.client.schemas.objects import StateType

    from flows.repair import repair
    from stratacrawl.cold import repairs
    from stratacrawl.crawl import crawl
    from stratacrawl.sim import SimulatorThread
    from stratacrawl.sim.crawl_config import sources_document
    from stratacrawl.sources import load_sources
    from tests.support.sites import small_site

    monkeypatch.setenv("STRATACRAWL_EXPECTATIONS_DIR", str(tmp_path / "exp"))
    specs = small_site(3, hosts(), backlog=20)
    products = next(s for s in specs if s.kind == "products")
    path = tmp_path / "sources.yaml"
    with SimulatorThread(specs):   # (the sites' ports are known once they serve)
        path.write_text(yaml.safe_dump(sources_document(specs, rate=200.0, concurrency=4),
                                       sort_keys=False))
        sources = load_sources(path)
        await crawl(comps, sources, until_idle=True, seconds=120, flush_s=0.5)
        await comps.clean(sources)
        products.behaviour.redesign = True
        running = asyncio.ensure_future(repair(source=products.id, sources_file=str(path),
                                               sample=6, return_state=True))
        paused = None
        async with get_client() as client:
            deadline = time.monotonic() + 180
            while paused is None and time.monotonic() < deadline and not running.done():
                runs = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(type=FlowRunFilterStateType(
                        any_=[StateType.PAUSED]))))
                paused = next((r for r in runs if r.parameters.get("source") == products.id),
                              None)
                await asyncio.sleep(1)
            assert paused is not None, running.done() and running.result()
            artifacts = await client.read_artifacts()
            assert any(a.key == "stratacrawl-repair" and products.id in str(a.data)
                       for a in artifacts)
            await client.resume_flow_run(paused.id, run_input={"approve": True,
                                                                "comment": "checked"})
        state = await running
    assert state.is_completed(), state
    assert "rules version 2" in (state.message or ""), state.message
    row = await repairs.proposal(comps.pool, products.id)
    assert row is not None and (row.state, row.comment) == ("approved", "checked")
    assert load_sources(path).get(products.id).extract.model_dump(exclude_none=True) == \
        row.extract
