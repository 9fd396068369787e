"""Small values every worker shares through hot, each a copy of something that lives
elsewhere, so losing Redis loses nothing: a source's session cookies (cold keeps them when
a worker closes), an origin's robots.txt text (the site has it), a source's active URL
rules (cold's ``url_rules`` table is the truth).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from stratacrawl.hot import keys
from stratacrawl.hot.client import HotRedis


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


async def cookies(redis: HotRedis, source_id: str) -> dict[str, str] | None:
    """The source's session cookies (name -> value), ``None`` when hot holds none."""
    raw = await redis.get(keys.cookies(source_id))
    return None if raw is None else dict(json.loads(raw))


async def save_cookies(redis: HotRedis, source_id: str, jar: dict[str, str] | str,
                       ttl_s: int, *, unless_present: bool = False) -> bool:
    """Keep the source's cookies (a dict or its JSON) for ``ttl_s``; with
    ``unless_present``, only where hot holds none. Returns whether they were written."""
    text = jar if isinstance(jar, str) else json.dumps(jar)
    return bool(await redis.set(keys.cookies(source_id), text, ex=ttl_s,
                                nx=unless_present))


async def robots_text(redis: HotRedis, origin: str) -> str | None:
    """The robots.txt text cached for an origin (``None``: not cached)."""
    raw = await redis.get(keys.robots(origin))
    return None if raw is None else _text(raw)


async def save_robots_text(redis: HotRedis, origin: str, text: str, ttl_s: int) -> None:
    await redis.set(keys.robots(origin), text, ex=ttl_s)


async def url_rules(redis: HotRedis, source_id: str) -> list[str] | None:
    """The texts of the source's active URL rules (``None``: not published in hot)."""
    raw = await redis.get(keys.url_rules(source_id))
    return None if raw is None else list(json.loads(raw))


async def publish_url_rules(redis: HotRedis, source_id: str, texts: Sequence[str]) -> None:
    await redis.set(keys.url_rules(source_id), json.dumps(sorted(texts)))
