"""``stratacrawl up`` / ``down``: the whole local platform with the Prefect UI."""

from __future__ import annotations

import asyncio
import sys

import typer

from stratacrawl.cli.common import console, fail, settings
from stratacrawl.errors import StratacrawlError
from stratacrawl.redact import redact
from stratacrawl.runtime import Runtime
from stratacrawl.services import Services
from stratacrawl.services.resolve import down as services_down
from stratacrawl.stack import LocalStack, prefect_env, project_root


def up(port: int = typer.Option(4200, help="Port of the Prefect server and UI.")) -> None:
    """Start the tiers, a Prefect server (UI on 127.0.0.1), a worker; register blocks; deploy."""
    s = settings()
    stack = LocalStack(s.state_path, port)
    try:
        endpoints = Services(s, keep=True).start()
        asyncio.run(Runtime(s, endpoints).prepare())
        root = project_root()
        env = prefect_env(s.state_path, endpoints, port)
        console.print("starting the Prefect server …")
        stack.start_server(env)
        stack.ensure_pool(env, root)
        stack.run([sys.executable, "-m", "deployments.bootstrap"], env, root)
        stack.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"], env, root)
        stack.start_worker(env, root)
        # recovery on worker start: hot rebuilt from cold before scheduled work claims
        stack.run([sys.executable, "-m", "prefect", "deployment", "run", "recovery/recovery"],
                  env, root)
    except StratacrawlError as e:
        stack.stop()
        fail(e)
    console.print(f"Prefect UI:   http://127.0.0.1:{port}")
    console.print(f"Prefect API:  {stack.api_url}   (export PREFECT_API_URL={stack.api_url})")
    for tier, url in (("Redis", endpoints.redis_url), ("Elasticsearch", endpoints.elasticsearch_url),
                      ("PostgreSQL", endpoints.database_url)):
        console.print(f"{tier + ':':<14}{redact(url)}")
    console.print("recovery: a run of recovery/recovery was started on the worker")
    console.print("stop everything with: stratacrawl down")


def down() -> None:
    """Stop the worker, the Prefect server and the embedded tiers."""
    s = settings()
    stopped = LocalStack(s.state_path).stop() + services_down(s)
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
