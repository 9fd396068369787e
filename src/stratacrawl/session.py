"""Tiers up, schema ready, components open: the preamble of every CLI job."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from stratacrawl.components import Components, open_components
from stratacrawl.runtime import Runtime
from stratacrawl.services import Services
from stratacrawl.settings import Settings


@contextlib.asynccontextmanager
async def open_session(settings: Settings) -> AsyncIterator[Components]:
    """Configured or embedded tiers (embedded ones this call started are stopped after)."""
    with Services(settings) as endpoints:
        rt = Runtime(settings, endpoints)
        await rt.prepare()
        async with open_components(rt) as comps:
            yield comps
