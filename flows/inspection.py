"""inspection (weekly): success trends, backlog growth, table growth and a
disk forecast, worker balance, retries; a Markdown artifact and a file."""

from __future__ import annotations

import asyncio

from prefect import flow
from prefect.artifacts import acreate_markdown_artifact

from flows.common import load_settings, step
from stratacrawl.monitor.inspection import inspect
from stratacrawl.wiring import open_app


@flow(name="inspection", log_prints=True)
async def inspection() -> str:
    async with open_app(await load_settings()) as comps:
        path = await step("weekly inspection", lambda: inspect(
            comps.pool, comps.settings.state_path / "inspection"))
    report = await asyncio.to_thread(path.read_text, encoding="utf-8")
    await acreate_markdown_artifact(key="stratacrawl-inspection", markdown=report,
                                    description="Weekly inspection")
    print(f"inspection report: {path}")
    return str(path)
