"""Serve every flow from this process (no work pool): ``python -m deployments.serve``.

For development; production uses ``prefect deploy`` with ``prefect.yaml`` and workers.
"""

from __future__ import annotations

from prefect import Flow, serve

from flows.discovery import discovery
from flows.fetch import fetch
from flows.health import health
from flows.staging_load import staging_load
from flows.submit import submit

ALL_FLOWS: list[Flow[..., object]] = [health, discovery, fetch, staging_load, submit]  # type: ignore[list-item]

if __name__ == "__main__":
    serve(*(f.to_deployment(name=f"{f.name}-local") for f in ALL_FLOWS))  # type: ignore[arg-type]
