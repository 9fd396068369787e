"""CPU seconds spent by the storage servers (PostgreSQL, Redis, the Elasticsearch API),
read from the operating system, so a run can say what each costs per page.

A server is found by the port it listens on; what it spent is its own CPU time, that of
its live child processes (PostgreSQL's backends) and that of the children it has reaped
(a backend whose connection closed), so a reading taken after a run minus one taken
before is everything the server did in between. Servers on other hosts read as absent.
``demote_the_rest`` does, after a run, the warm indexing its crawls left to the
``demotion`` deployment, so those readings include it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psutil
from psycopg.conninfo import conninfo_to_dict

from stratacrawl.services import Endpoints

if TYPE_CHECKING:
    from stratacrawl.wiring import Runtime


def listener(port: int | str) -> psutil.Process | None:
    """The process listening on TCP ``port`` (or on the Unix socket at that path) on
    this host, if any (and visible)."""
    kind = "unix" if isinstance(port, str) else "tcp"
    with contextlib.suppress(psutil.Error):
        for conn in psutil.net_connections(kind=kind):
            if not conn.pid or not conn.laddr:
                continue
            if kind == "unix" and conn.laddr == port:
                return psutil.Process(conn.pid)
            if kind == "tcp" and conn.status == psutil.CONN_LISTEN and conn.laddr.port == port:
                return psutil.Process(conn.pid)
    return None


def tree_cpu_s(proc: psutil.Process) -> float:
    """CPU seconds of ``proc``, its live descendants and the children they reaped."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        for p in (proc, *proc.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
    return total


def port_of(url: str) -> int | str | None:
    """The TCP port of a server on this host, or the path of its Unix socket (a libpq
    ``host=/dir`` connection string); None for a server elsewhere."""
    if "://" not in url and "=" in url:   # libpq key=value
        info = conninfo_to_dict(url)
        host, port = str(info.get("host") or ""), int(info.get("port") or 5432)
        if host.startswith("/"):
            return f"{host}/.s.PGSQL.{port}"
        url = f"postgresql://{host or '127.0.0.1'}:{port}"
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host not in ("127.0.0.1", "localhost", "::1", "") and not host.startswith("127."):
        return None   # another host: its CPU is not ours to read
    defaults = {"postgresql": 5432, "postgres": 5432, "redis": 6379, "http": 80, "https": 443}
    return parts.port or defaults.get(parts.scheme.split("+")[0])


@dataclass
class ServerCPU:
    """The servers behind ``urls`` (name → URL), and their CPU seconds so far."""

    procs: dict[str, psutil.Process]

    @classmethod
    def of(cls, urls: Mapping[str, str]) -> ServerCPU:
        procs = {}
        for name, url in urls.items():
            port = port_of(url)
            proc = listener(port) if port else None
            if proc is not None:
                procs[name] = proc
        return cls(procs)

    @classmethod
    def of_endpoints(cls, endpoints: Endpoints) -> ServerCPU:
        """The three storage servers a run uses."""
        return cls.of({"postgres": endpoints.database_url, "redis": endpoints.redis_url,
                       "elasticsearch_api": endpoints.elasticsearch_url})

    def read(self) -> dict[str, float]:
        return {name: tree_cpu_s(p) for name, p in self.procs.items()}

    @staticmethod
    def spent(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
        return {k: max(0.0, after[k] - before.get(k, 0.0)) for k in after}


@dataclass
class DemotionRest:
    """The warm indexing a run's crawls left to the ``demotion`` deployment, done at once."""

    rows: int              # URL states indexed (two warm documents each)
    client_cpu_s: float    # this process's CPU for it (the servers' is in their reading)
    error: str | None = None   # warm refused or was away: the rest stays in the outbox


async def demote_the_rest(rt: Runtime) -> DemotionRest:
    """Demote every committed fetch not yet in warm, in this process, and what it cost
    this process. A crawl demotes within ``end_demotion_s`` at its end and leaves the rest
    to the ``demotion`` deployment: a run that reports the CPU its pages cost counts that
    rest too (read the servers' CPU around this call). Run after the run's clock: it is
    deferred work, not the crawl's; no process start-up is counted for it."""
    from stratacrawl.tiers.demotion import demote
    from stratacrawl.wiring import open_components

    async with open_components(rt) as c:   # the tiers are prepared: the run used them
        cpu = time.process_time()
        stats = await demote(c.pool, c.warm)
        return DemotionRest(stats.rows, time.process_time() - cpu, stats.error)
