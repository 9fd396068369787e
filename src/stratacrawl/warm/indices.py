"""Warm-tier index layout: weekly ``url_dedup-YYYYww`` and ``url_meta-YYYYww``.

One composable index template per family (keyword types, no analysis on hot
fields); every weekly index joins a read alias (``url_dedup``, ``url_meta``)
through the template, so readers never list weeks. ``ensure_templates`` is
idempotent and runs at start.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from elasticsearch import AsyncElasticsearch, BadRequestError

FAMILIES = ("url_dedup", "url_meta")

MAPPINGS: dict[str, dict[str, Any]] = {
    "url_dedup": {
        "dynamic": "strict",
        "properties": {
            "url_hash": {"type": "keyword"},
            "domain": {"type": "keyword"},
            "source_id": {"type": "keyword"},
            "last_crawled": {"type": "date"},
            "last_access": {"type": "date"},
            "retry_count": {"type": "short"},
            "http_status": {"type": "keyword"},
        },
    },
    "url_meta": {
        "dynamic": "false",  # extracted fields are kept in _source, not indexed
        "properties": {
            "url_hash": {"type": "keyword"},
            "url": {"type": "keyword", "index": False},
            "source_id": {"type": "keyword"},
            "crawled_at": {"type": "date"},
            "last_access": {"type": "date"},
            "content_hash": {"type": "keyword"},
            "content_length": {"type": "integer"},
            "etag": {"type": "keyword", "index": False},
            "last_modified": {"type": "keyword", "index": False},
            "fields": {"type": "object", "enabled": False},
        },
    },
}


def week_suffix(when: datetime) -> str:
    """ISO year and week: ``202648``."""
    return _week_of(when.astimezone(UTC).date())


@functools.lru_cache(maxsize=64)
def _week_of(day: date) -> str:  # demotion asks once per document, for a handful of days
    iso = day.isocalendar()
    return f"{iso.year}{iso.week:02d}"


@dataclass(frozen=True)
class IndexLayout:
    """Names and settings of the warm indices; ``prefix`` isolates tenants and tests."""

    prefix: str = ""
    shards: int = 1
    replicas: int = 0
    refresh_interval: str = "30s"
    box_type: str | None = None

    def alias(self, family: str) -> str:
        return f"{self.prefix}{family}"

    def index(self, family: str, when: datetime) -> str:
        return f"{self.prefix}{family}-{week_suffix(when)}"

    def window(self, family: str, days: int, now: datetime | None = None) -> list[str]:
        """The weekly indices covering the last ``days`` days, newest first."""
        now = now or datetime.now(UTC)
        names: list[str] = []
        for d in range(0, days + 7, 7):
            name = self.index(family, now - timedelta(days=d))
            if name not in names:
                names.append(name)
        return names

    def template(self, family: str) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "number_of_shards": self.shards,
            "number_of_replicas": self.replicas,
            "refresh_interval": self.refresh_interval,
        }
        if self.box_type:
            settings["index.routing.allocation.require.box_type"] = self.box_type
        return {
            "index_patterns": [f"{self.prefix}{family}-*"],
            "template": {
                "settings": settings,
                "mappings": MAPPINGS[family],
                "aliases": {self.alias(family): {}},
            },
            "priority": 100,
        }


async def ensure_templates(es: AsyncElasticsearch, layout: IndexLayout) -> None:
    for family in FAMILIES:
        await es.indices.put_index_template(name=f"{layout.prefix}{family}", **layout.template(family))


async def ensure_week_indices(es: AsyncElasticsearch, layout: IndexLayout,
                              weeks_ahead: int = 1, now: datetime | None = None) -> list[str]:
    """Create this week's and the next ``weeks_ahead`` weeks' indices (roll-ahead)."""
    now = now or datetime.now(UTC)
    created = []
    for family in FAMILIES:
        for w in range(weeks_ahead + 1):
            name = layout.index(family, now + timedelta(weeks=w))
            if not await es.indices.exists(index=name) and await create_index(es, name):
                created.append(name)
    return created


async def create_index(es: AsyncElasticsearch, name: str) -> bool:
    """Create ``name``; False when another process created it first (processes starting
    at once race for the week's index, and "already exists" is the outcome wanted)."""
    try:
        await es.indices.create(index=name)
    except BadRequestError as e:
        if e.error != "resource_already_exists_exception":
            raise
        return False
    return True
