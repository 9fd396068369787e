"""Lua scripts of the hot tier (``lua/*.lua`` beside this module), registered per client."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from redis.commands.core import AsyncScript

from stratacrawl.hot.client import HotRedis

LUA = Path(__file__).parent / "lua"


@cache
def source(name: str) -> str:
    return (LUA / f"{name}.lua").read_text()


def script(client: HotRedis, name: str) -> AsyncScript:
    """A registered script (EVALSHA with a fallback to EVAL on NOSCRIPT)."""
    return client.register_script(source(name))
