"""Lua scripts of the hot tier (``lua/*.lua`` beside this module), registered per client.

A script includes a shared file with a line ``-- include: NAME`` (``lua/NAME.lua``'s text
takes its place), so a rule several scripts apply is written once. Scripts take their
arguments by name: one JSON object in ``ARGV[1]`` (:func:`named`), read with
``cjson.decode``.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from redis.commands.core import AsyncScript

from stratacrawl.hot.client import HotRedis

LUA = Path(__file__).parent / "lua"
_INCLUDE = re.compile(r"^-- include: (\w+)$", re.MULTILINE)


@cache
def source(name: str) -> str:
    """The script's text, its includes in place."""
    return _INCLUDE.sub(lambda m: source(m.group(1)), (LUA / f"{name}.lua").read_text())


def script(client: HotRedis, name: str) -> AsyncScript:
    """A registered script (EVALSHA with a fallback to EVAL on NOSCRIPT)."""
    return client.register_script(source(name))


def named(**args: Any) -> str:
    """A script's arguments by name, as its ``ARGV[1]``."""
    return json.dumps(args, separators=(",", ":"))
