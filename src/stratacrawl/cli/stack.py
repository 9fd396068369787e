"""``stratacrawl up`` / ``down``: the whole local platform with the Prefect UI."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import typer
from rich.markup import escape

from stratacrawl.cli.common import bad_input, console, fail, settings
from stratacrawl.errors import StratacrawlError
from stratacrawl.redact import redact
from stratacrawl.services.resolve import down as services_down
from stratacrawl.stack import (
    LocalStack,
    forget_platform,
    prefect_env,
    project_root,
    record_platform,
)
from stratacrawl.stack.lifecycle import NotOurServer


def _sources_file(configured: Path, root: Path) -> Path:
    """The sources file the worker's runs will read, as an absolute path: relative to
    the working directory if it is there, else to the project folder (where runs start)."""
    if configured.is_absolute():
        return configured
    here = Path.cwd() / configured
    return here.resolve() if here.exists() else root / configured


def up(port: int = typer.Option(4200, help="Port of the Prefect server and UI."),
       demo: bool = typer.Option(False, "--demo", help="Also start the site simulator and "
                                 "crawl its sites (a sources file is written for them)."),
       demo_sources: int = typer.Option(3, min=1, max=50, help="Simulated sites of --demo."),
       ops_port: int = typer.Option(8090, help="Port of the ops page, which also serves the "
                                    "Data Docs under /docs/."),
       alert_webhook: str | None = typer.Option(
           None, envvar="STRATACRAWL_ALERT_WEBHOOK_URL",
           help="POST every fired P0/P1 alert here as JSON (a Prefect automation)."),
       take_over: bool = typer.Option(False, "--take-over", help="Use the Prefect server "
                                      "on --port even though another platform (state "
                                      "folder) owns it, and make it this platform's.")) -> None:
    """Start the tiers, a Prefect server (UI on 127.0.0.1), a worker; register blocks and
    automations; deploy. With no sources file the schedules that need one are paused.
    Runs an earlier life left unfinished are marked Crashed first."""
    from stratacrawl.wiring import runtime_of  # (here: `--help` does not load the engines)

    s = settings()
    stack = LocalStack(s.state_path, port)
    paused = ""
    try:   # before anything starts or changes: is the server on the port ours to use?
        stack.check_server(take_over=take_over)
    except NotOurServer as e:
        bad_input(f"{e}; use another --port, or --take-over to make it this platform's "
                  f"({s.state_path.resolve()})")
    try:
        with runtime_of(s, keep=True) as rt:   # (kept: they run under the platform)
            asyncio.run(rt.prepare())
        endpoints = rt.endpoints
        root = project_root()
        env = prefect_env(s.state_path, endpoints, port)
        env["STRATACRAWL_PROJECT_DIR"] = str(root)
        if alert_webhook:
            env["STRATACRAWL_ALERT_WEBHOOK_URL"] = alert_webhook
        if demo:
            _, sources = stack.start_simulator(env, demo_sources)
            console.print(f"site simulator: {demo_sources} sites, sources file {sources}")
        else:
            sources = _sources_file(s.sources, root)
        env["STRATACRAWL_SOURCES"] = str(sources)  # the sources block the runs read
        ops = f"http://127.0.0.1:{ops_port}"
        # validation runs link their Data Docs pages where the ops page serves them
        env["STRATACRAWL_DATA_DOCS_URL"] = f"{ops}/docs/"
        console.print("starting the Prefect server …")
        stack.start_server(env)
        replaced = stack.claim()
        if replaced:
            console.print(f"[yellow]took over the Prefect server[/] of the platform of "
                          f"{escape(str(replaced.get('state_dir')))}: stop its worker with "
                          f"`STRATACRAWL_STATE_DIR={escape(str(replaced.get('state_dir')))} "
                          "stratacrawl down`")
        # before a worker takes runs: what an unclean stop left Running holds its slots
        for line in stack.reconcile("the platform stopped without finishing it").lines():
            console.print(f"earlier runs: {escape(line)}")
        stack.ensure_pool(env, root)
        console.print(escape(stack.run([sys.executable, "-m", "deployments.bootstrap"],
                                       env, root).strip()))
        stack.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--all"], env, root)
        console.print(escape(stack.run([sys.executable, "-m", "deployments.bootstrap",
                                        "deployment-limits"], env, root).strip()))
        if not sources.exists():
            paused = stack.run([sys.executable, "-m", "deployments.schedules", "pause"],
                               env, root).strip().removeprefix("paused: ")
        stack.start_worker(env, root)
        if sources.exists():
            stack.start_ops(env, ops_port, sources)
        record_platform(s.state_path, sources=str(sources), prefect_api=stack.api_url,
                        ops=ops if sources.exists() else None)
        # recovery on worker start: hot rebuilt from cold before scheduled work claims
        stack.run([sys.executable, "-m", "prefect", "deployment", "run", "recovery/recovery"],
                  env, root)
    except StratacrawlError as e:
        stack.stop()
        fail(e)
    if sources.exists():
        console.print(f"sources file: {sources}   (the CLI reads it when given none)")
    console.print(f"state:        {s.state_path}")
    console.print(f"Prefect UI:   http://127.0.0.1:{port}")
    console.print(f"Prefect API:  {stack.api_url}   (export PREFECT_API_URL={stack.api_url})")
    for tier, url in (("Redis", endpoints.redis_url), ("Elasticsearch", endpoints.elasticsearch_url),
                      ("PostgreSQL", endpoints.database_url)):
        console.print(f"{tier + ':':<13} {redact(url)}")
    if sources.exists():
        console.print(f"Ops page:     {ops}   (Data Docs: {ops}/docs/)")
    console.print("recovery: a run of recovery/recovery was started on the worker")
    if paused:
        looked = (f"{escape(str(sources))}" if s.sources.is_absolute() else
                  f"{escape(str(s.sources))} in {escape(str(Path.cwd()))} nor in "
                  f"{escape(str(root))}")
        console.print(f"[yellow]no sources file[/] (looked for {looked}): schedules of "
                      f"{paused} paused; write one and run `stratacrawl up` again, or try "
                      "`stratacrawl up --demo`")
    console.print("stop everything with: stratacrawl down")


def down() -> None:
    """Stop the worker, the Prefect server and the embedded tiers."""
    s = settings()
    stopped, reconciled = LocalStack(s.state_path).stop()
    stopped += services_down(s)
    forget_platform(s.state_path)
    for line in reconciled.lines() if reconciled else []:
        console.print(f"runs: {escape(line)}")
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
