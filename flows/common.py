"""What the flows share: settings from blocks and environment (the tiers themselves are
opened by :func:`stratacrawl.wiring.open_app`), the sources file of a run, artifacts, and
steps as task runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import uvloop
from prefect import get_run_logger, task
from prefect.artifacts import (
    acreate_link_artifact,
    acreate_markdown_artifact,
    acreate_progress_artifact,
    acreate_table_artifact,
    aupdate_progress_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.concurrency.asyncio import concurrency
from prefect.events import emit_event
from prefect.states import Failed

from blocks.connections import BLOCK_NAMES
from flows.retries import TRANSIENT
from stratacrawl.errors import ConfigError, StratacrawlError
from stratacrawl.settings import Settings
from stratacrawl.sources import SourcesFile, load_sources

# Async flow runs are driven by asyncio.run() in the flow-run process: on uvloop, as
# every `stratacrawl` command (the fetch flow holds a thousand requests in flight; the
# default loop spends far more CPU on each).
asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def load_settings(**overrides: Any) -> Settings:
    """Environment settings, overridden by any registered connection block, then by ``overrides``."""
    values: dict[str, Any] = {}
    for name, block_cls in BLOCK_NAMES.items():
        try:
            block = await block_cls.aload(name)
        except ValueError:  # not registered: keep the environment's value
            continue
        values.update(block.settings_overrides())  # type: ignore[attr-defined]
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)


def flow_sources(settings: Settings, **chosen: str | None) -> SourcesFile:
    """The sources file of a flow run (its ``sources_file`` parameter, else the sources
    block or ``STRATACRAWL_SOURCES``). Bad input fails the run at once (configuration
    errors are never retried) with the parameter named: ``sources_file`` for a file
    that is missing or invalid, and each of ``chosen`` (e.g. ``source="news-1"``) that
    names no source of the file."""
    try:
        sources = load_sources(settings.sources)
    except StratacrawlError as e:
        raise ConfigError(f"parameter sources_file ({settings.sources}): {e}") from e
    ids = [s.id for s in sources.sources]
    for parameter, value in chosen.items():
        if value is not None and value not in ids:
            raise ConfigError(f"parameter {parameter}: no source {value!r} in "
                              f"{settings.sources}; have: {', '.join(ids)}")
    return sources


async def publish(key: str, title: str, lines: list[str]) -> None:
    """A Markdown artifact (prose: lists, notes), also written to the run log."""
    md = f"## {title}\n\n" + "\n".join(lines)
    get_run_logger().info(md)
    await acreate_markdown_artifact(key=key, markdown=md, description=title)


async def publish_table(key: str, title: str, rows: list[dict[str, Any]]) -> None:
    """A table artifact (the UI sorts and filters it; the API returns it as rows), one row
    per source or figure; its title and row count go to the run log. ``key`` keeps the
    history of one table across runs (Artifacts → key in the UI)."""
    get_run_logger().info("%s (%d rows, artifact %s)", title, len(rows), key)
    await acreate_table_artifact(table=rows, key=key, description=title)


async def publish_link(key: str, title: str, url: str) -> None:
    """A link artifact, e.g. to a validation result's page in Data Docs."""
    await acreate_link_artifact(link=url, link_text=title, key=key, description=title)


def figures(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """A one-level summary as table rows (figure, value)."""
    return [{"figure": k, "value": v} for k, v in summary.items()]


class Progress:
    """A progress artifact of a long run, updated in place (0-100 %)."""

    def __init__(self, description: str) -> None:
        self.description = description
        self.artifact_id: Any = None

    async def __call__(self, fraction: float) -> None:
        percent = round(max(0.0, min(1.0, fraction)) * 100, 1)
        if self.artifact_id is None:
            self.artifact_id = await acreate_progress_artifact(
                progress=percent, description=self.description)
        else:
            await aupdate_progress_artifact(self.artifact_id, progress=percent)


# Steps of different deployments that must not run at once take a slot of a Prefect
# global concurrency limit (created by deployments/bootstrap.py): demotion and the
# nightly sinking's backfill both move URL state to warm from cold's watermark. The
# PostgreSQL advisory lock inside demote() stays as the safety net (a limit that does
# not exist on the server is skipped, with Prefect's warning).
WARM_WRITER = "stratacrawl-warm-writer"
STEP_LIMITS = {"demote to warm": WARM_WRITER, "backfill demotion": WARM_WRITER}
LIMIT_WAIT_S = 900.0


Verdict = Callable[[Any], "str | None"]


@task(cache_policy=NO_CACHE, **TRANSIENT)
async def _step(fn: Callable[[], Awaitable[Any]], limit: str | None = None,
                fails: Verdict | None = None) -> Any:
    if limit is None:
        result = await fn()
    else:
        async with concurrency(limit, occupy=1, timeout_seconds=LIMIT_WAIT_S):
            result = await fn()
    if fails is not None and (why := fails(result)):
        return Failed(message=why, data=result)   # (not retried: no exception)
    return result


async def step(name: str, fn: Callable[[], Awaitable[Any]], fails: Verdict | None = None) -> Any:
    """``fn`` as a task run named ``name`` with the transient-retry policy: the pipeline's
    real steps show in the run's page with their state, duration and retries. ``fn``
    starts the work afresh each time (a retry runs it again); it may hold open clients,
    so nothing is cached or persisted. Also the core's step runner
    (:class:`stratacrawl.step_runner.StepRunner`).

    ``fails`` judges what ``fn`` returned: a message means the step's work failed (a
    source failed its fetches, a check failed), and the task run ends Failed with that
    message — red in the run's graph where the failure is — while its result is still
    returned to the flow, which decides the run's own state."""
    task = _step.with_options(name=name, task_run_name=name)
    if fails is None:
        return await task(fn, STEP_LIMITS.get(name))
    state = await task(fn, STEP_LIMITS.get(name), fails, return_state=True)  # type: ignore[misc]
    result = await state.aresult(raise_on_failure=False)
    if isinstance(result, BaseException):
        raise result
    return result


def emit(event: str, payload: dict[str, Any]) -> None:
    """The event of an alert: its source is the resource, and a fired alert's level and
    rule are resource labels, so an automation can match on them
    (deployments/automations.py)."""
    resource = {"prefect.resource.id": f"stratacrawl.source.{payload['source']}",
                "prefect.resource.name": str(payload["source"])}
    if "level" in payload:
        resource["stratacrawl.alert.level"] = str(payload["level"])
    if "rule" in payload:   # (the repair automation starts on the integrity rule's alerts)
        resource["stratacrawl.alert.rule"] = str(payload["rule"])
    emit_event(event=event, resource=resource, payload=payload)
