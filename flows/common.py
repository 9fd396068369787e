"""What every flow does first: settings from blocks and environment, tiers up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvloop
from prefect import get_run_logger
from prefect.artifacts import acreate_markdown_artifact

from blocks.connections import BLOCK_NAMES
from stratacrawl.components import Components, open_components
from stratacrawl.runtime import Runtime
from stratacrawl.services import Services
from stratacrawl.settings import Settings

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


@contextlib.asynccontextmanager
async def runtime(**overrides: Any) -> AsyncIterator[tuple[Runtime, Components]]:
    """Tiers and open components for one flow run: configured servers, or embedded ones
    (stopped afterwards unless already running, e.g. under ``stratacrawl up``)."""
    settings = await load_settings(**overrides)
    with Services(settings) as endpoints:
        rt = Runtime(settings, endpoints)
        await rt.prepare()
        async with open_components(rt) as comps:
            yield rt, comps


async def publish(key: str, title: str, lines: list[str]) -> None:
    """A Markdown artifact, also written to the run log."""
    md = f"## {title}\n\n" + "\n".join(lines)
    get_run_logger().info(md)
    await acreate_markdown_artifact(key=key, markdown=md, description=title)
