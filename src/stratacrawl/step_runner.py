"""Named steps of a maintenance job (recovery, sinking, compensation), and who runs them.

A job calls ``await run(name, fn)`` for each of its steps, where ``fn`` starts the step
afresh each time it is called. The CLI runs steps directly; a Prefect flow passes a runner
that makes each step a task run of its own, with its state, duration and retries in the
UI — and since ``fn`` starts the work anew, a retried step really runs again. The core
never imports Prefect: this signature is all it knows of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol


class StepRunner(Protocol):
    async def __call__(self, name: str, fn: Callable[[], Awaitable[Any]]) -> Any: ...


async def run_directly(name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
    """The default runner: the step, now, in this task."""
    return await fn()
