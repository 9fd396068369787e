"""What a simulated source is (kind, address, timeline) and how it behaves (faults, limits)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

Kind = Literal["news", "products", "prices"]
KINDS: tuple[Kind, ...] = ("news", "products", "prices")


@dataclass
class Behaviour:
    """Per-source behaviour; mutable at run time through ``/_sim/control``."""

    latency_median_ms: float = 0.0      # log-normal latency; 0 = answer at once
    latency_sigma: float = 0.5
    slow_tail_rate: float = 0.0         # share of requests with a 10x latency
    rate_limit: float | None = None     # requests/s past which the source answers 429
    error_rate: float = 0.0             # share of 5xx answers (500, 502, 503)
    retry_after_503: float | None = 2.0  # the Retry-After of those 503s (None: no header)
    reset_rate: float = 0.0             # share of connections dropped without an answer
    hang_rate: float = 0.0              # share of requests that hang (for timeouts)
    hang_s: float = 120.0
    crawl_delay: float | None = None    # robots.txt Crawl-delay
    disallow: tuple[str, ...] = ("/private/",)
    require_session: bool = False       # pages need the cookie the first page sets
    redesign: bool = False              # same status, different structure (format anomaly)
    oversized_rate: float = 0.005       # share of item pages of 1-5 MB
    duplicates: bool = True             # list pages link items under duplicate URLs
    traps: bool = True                  # redirect chain, redirect loop, gzip bomb, private links

    def update(self, values: dict[str, object]) -> None:
        for key, value in values.items():
            if not hasattr(self, key):
                raise KeyError(key)
            setattr(self, key, value)


@dataclass
class SourceSpec:
    """One simulated source on its own loopback address and port."""

    index: int
    id: str
    kind: Kind
    host: str
    port: int
    seed: int
    epoch: datetime                      # items before it form the backlog; after it, new ones
    backlog: int = 300                   # items already published at epoch (spread over 24 h)
    publish_every_s: float = 60.0        # one new item per this many seconds after epoch
    page_size: int = 20                  # items per list page
    behaviour: Behaviour = field(default_factory=Behaviour)
    stopped_at: datetime | None = None   # set when the source stops publishing

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def currency(self) -> str:
        return ("USD", "EUR", "GBP", "CNY", "JPY")[self.index % 5]


def default_epoch(now: datetime | None = None) -> datetime:
    """Now, floored to 10 minutes: two simulators started together build the same site."""
    now = now or datetime.now(UTC)
    return now.replace(minute=now.minute - now.minute % 10, second=0, microsecond=0)


def build_specs(n: int, seed: int, *, epoch: datetime | None = None, first_host: int = 10,
                ports: list[int] | None = None, behaviour: Behaviour | None = None,
                noise: bool = False) -> list[SourceSpec]:
    """``n`` sources: kinds in turn (news, products, prices), each on ``127.0.0.<first_host+i>``.

    ``noise`` gives every source a real site's normal noise (log-normal latency with a
    median of ~1.6 s and a slow tail, 0.4 % 5xx, 0.2 % resets); ``behaviour`` overrides
    everything with one behaviour for all.
    """
    epoch = epoch or default_epoch()
    rng = random.Random(f"specs:{seed}")
    specs = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        b = replace(behaviour) if behaviour else Behaviour(
            require_session=(kind == "products" and i % 2 == 1),
            crawl_delay=None,
        )
        if noise and behaviour is None:
            b.latency_median_ms = 1800.0 * 0.9
            b.latency_sigma = 0.35
            b.slow_tail_rate = 0.002
            b.error_rate = 0.004
            b.reset_rate = 0.002
        host_octet = first_host + i
        specs.append(SourceSpec(
            index=i, id=f"{kind}-{i + 1}", kind=kind,
            host=f"127.0.{host_octet // 250}.{host_octet % 250 + 1}" if host_octet >= 250
            else f"127.0.0.{host_octet}",
            port=ports[i] if ports else 0,
            seed=seed, epoch=epoch,
            backlog=rng.randint(150, 400),
            publish_every_s=rng.choice((30.0, 60.0, 120.0, 300.0)),
            behaviour=b,
        ))
    return specs
