"""Resolve one URL per tier: configured, already running embedded, or started now."""

from __future__ import annotations

import contextlib
import fcntl
from dataclasses import dataclass, field
from types import TracebackType

from stratacrawl.cold.db import ensure_database
from stratacrawl.errors import ServiceError
from stratacrawl.redact import redact
from stratacrawl.services.embedded import EMBEDDED, Registry, Running
from stratacrawl.settings import Settings

EMBEDDED_DATABASE = "stratacrawl"
TIERS = ("redis", "elasticsearch", "postgres")


@dataclass(frozen=True)
class Endpoints:
    """Where each tier answers. ``embedded`` names the tiers served by embedded servers."""

    redis_url: str
    elasticsearch_url: str
    database_url: str
    embedded: frozenset[str] = field(default_factory=frozenset)

    def url(self, tier: str) -> str:
        return {"redis": self.redis_url, "elasticsearch": self.elasticsearch_url,
                "postgres": self.database_url}[tier]


class Services:
    """Context manager giving :class:`Endpoints`; stops on exit what it started itself.

    ``keep=True`` (``services up``) leaves started servers running for other
    processes; they are recorded in the state folder's registry.
    """

    def __init__(self, settings: Settings | None = None, *, keep: bool = False,
                 tiers: tuple[str, ...] = TIERS) -> None:
        self.settings = settings or Settings()
        self.keep = keep
        self.tiers = tiers
        self.started: list[str] = []

    def configured(self, tier: str) -> str | None:
        s = self.settings
        return {"redis": s.redis_url, "elasticsearch": s.elasticsearch_url,
                "postgres": s.database_url}[tier]

    def start(self) -> Endpoints:
        # One process at a time per state folder: starting servers and creating the
        # database (CREATE DATABASE refuses to run twice at once from template1).
        state = self.settings.state_path
        state.mkdir(parents=True, exist_ok=True)
        with open(state / ".services.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._start()

    def _start(self) -> Endpoints:
        urls: dict[str, str] = {}
        embedded: set[str] = set()
        try:
            for tier in TIERS:
                url = self.configured(tier)
                if url is None and tier in self.tiers:
                    server = EMBEDDED[tier](self.settings.state_path)
                    running, started = server.ensure()
                    if started:
                        self.started.append(tier)
                    url = running.url
                    if tier == "postgres":
                        url = ensure_database(url, EMBEDDED_DATABASE)
                    embedded.add(tier)
                urls[tier] = url or ""
        except BaseException:
            self.stop()
            raise
        return Endpoints(urls["redis"], urls["elasticsearch"], urls["postgres"],
                         frozenset(embedded))

    def stop(self) -> None:
        for tier in reversed(self.started):
            with contextlib.suppress(ServiceError, OSError):
                EMBEDDED[tier](self.settings.state_path).stop()
        self.started.clear()

    def __enter__(self) -> Endpoints:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.keep:
            self.stop()


def status(settings: Settings) -> dict[str, tuple[str, str | None]]:
    """Per tier: ``("configured"|"embedded"|"stopped", url)``."""
    reg = Registry(settings.state_path)
    out: dict[str, tuple[str, str | None]] = {}
    for tier in TIERS:
        url = Services(settings).configured(tier)
        if url:
            out[tier] = ("configured", redact(url))
            continue
        running: Running | None = reg.alive(tier)
        out[tier] = ("embedded", running.url) if running else ("stopped", None)
    return out


def down(settings: Settings) -> list[str]:
    """Stop every embedded server recorded in the state folder."""
    stopped = []
    for tier in reversed(TIERS):
        if EMBEDDED[tier](settings.state_path).stop():
            stopped.append(tier)
    return stopped
