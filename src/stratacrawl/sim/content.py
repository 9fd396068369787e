"""Every item of every source, derived from (seed, source, item number) alone.

Item ``k`` of a source is published at ``epoch - (backlog - k) * spacing`` for the
backlog and ``epoch + (k - backlog + 1) * publish_every_s`` after; its fields come
from a random generator seeded with ``seed:source:k``. So the same seed builds the
same site, and the ground truth can be computed without a server.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from stratacrawl.sim.spec import SourceSpec

WORDS = (
    "market river policy signal harbor energy council data season bridge garden report"
    " climate winter city railway summit budget forest island museum festival science"
    " ocean village school engine planet market orbit water harvest storm light minister"
    " court trade health studio museum network coast valley mountain voice record league"
    " factory digital journey border crystal archive lantern meadow quarter silver copper"
).split()
FIRST = ("Ana", "Bo", "Chen", "Dara", "Eli", "Farah", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea")
LAST = ("Moreau", "Okafor", "Lindqvist", "Tanaka", "Silva", "Novak", "Haddad", "Kowal", "Reyes")
ADJ = ("Compact", "Deluxe", "Ultra", "Classic", "Smart", "Eco", "Pro", "Mini", "Rugged", "Quiet")
NOUN = ("Kettle", "Lamp", "Backpack", "Blender", "Speaker", "Chair", "Drill", "Monitor", "Tent")
SYMBOLS = ("ALP", "BRV", "CMX", "DLT", "ERG", "FNX", "GRD", "HLX", "IOT", "JVL", "KRN", "LUX")
BACKLOG_WINDOW_S = 86_400.0


@dataclass(frozen=True)
class Item:
    """One published item with the fields a crawler should extract."""

    k: int
    published: datetime
    fields: dict[str, Any]
    size_hint: int          # target page size in bytes (long tail)


def published_at(spec: SourceSpec, k: int) -> datetime:
    if k < spec.backlog:
        spacing = BACKLOG_WINDOW_S / spec.backlog
        return spec.epoch - timedelta(seconds=(spec.backlog - k) * spacing)
    return spec.epoch + timedelta(seconds=(k - spec.backlog + 1) * spec.publish_every_s)


def visible_count(spec: SourceSpec, now: datetime) -> int:
    """How many items are published at ``now`` (items never disappear)."""
    if spec.stopped_at is not None and now > spec.stopped_at:
        now = spec.stopped_at  # the source stopped publishing then
    if now >= spec.epoch:
        return spec.backlog + int((now - spec.epoch).total_seconds() // spec.publish_every_s)
    spacing = BACKLOG_WINDOW_S / spec.backlog
    newest = spec.backlog - (spec.epoch - now).total_seconds() / spacing
    return max(0, min(spec.backlog, math.floor(newest) + 1))


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


def _sentence(rng: random.Random) -> str:
    s = _words(rng, rng.randint(8, 18))
    return s[0].upper() + s[1:] + "."


@lru_cache(maxsize=65536)
def item(spec_key: tuple[int, str, str, str, int], k: int) -> Item:
    """The item ``k``; ``spec_key`` = (seed, source id, kind, currency, oversized per mille)."""
    seed, source_id, kind, currency, oversized_pm = spec_key
    rng = random.Random(f"{seed}:{source_id}:{k}")
    size = int(min(max(rng.lognormvariate(math.log(30_000), 0.55), 8_000), 600_000))
    if rng.random() * 1000 < oversized_pm:
        size = rng.randint(1_000_000, 5_000_000)
    fields: dict[str, Any]
    if kind == "news":
        paragraphs = [" ".join(_sentence(rng) for _ in range(rng.randint(3, 6)))
                      for _ in range(rng.randint(4, 9))]
        fields = {
            "title": _words(rng, rng.randint(4, 9)).title(),
            "author": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "text": "\n\n".join(paragraphs),
        }
    elif kind == "products":
        fields = {
            "name": f"{rng.choice(ADJ)} {rng.choice(NOUN)} {rng.randint(100, 999)}",
            "price": round(rng.uniform(3, 1500), 2),
            "currency": currency,
            "stock": rng.choice((0, *range(1, 300))),
        }
    else:
        fields = {
            "symbol": f"{rng.choice(SYMBOLS)}{k}",
            "price": round(rng.uniform(0.5, 900), 4),
            "currency": currency,
        }
    return Item(k=k, published=datetime.min, fields=fields, size_hint=size)


def get_item(spec: SourceSpec, k: int) -> Item:
    key = (spec.seed, spec.id, spec.kind, spec.currency,
           int(spec.behaviour.oversized_rate * 1000))
    base = item(key, k)
    published = published_at(spec, k)
    fields = dict(base.fields)
    if spec.kind == "news":
        fields["published"] = published.isoformat().replace("+00:00", "Z")
    elif spec.kind == "prices":
        fields["updated"] = published.isoformat().replace("+00:00", "Z")
    return Item(k=k, published=published, fields=fields, size_hint=base.size_hint)


def item_path(spec: SourceSpec, k: int) -> str:
    return {"news": f"/article/{k}", "products": f"/product/{k}", "prices": f"/api/prices/{k}"}[
        spec.kind]


def truth(spec: SourceSpec, now: datetime) -> list[dict[str, Any]]:
    """Every item published at ``now``: its canonical URL and field values."""
    return [{"url": spec.base_url + item_path(spec, k), "id": k, **get_item(spec, k).fields}
            for k in range(visible_count(spec, now))]
