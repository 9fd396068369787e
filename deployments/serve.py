"""Serve every flow from this process (no work pool): ``python -m deployments.serve``.

For development; production uses ``prefect deploy`` with ``prefect.yaml`` and workers.
The list is checked against ``prefect.yaml`` by the tests: a flow added there is served
here too.
"""

from __future__ import annotations

from typing import Any

from prefect import Flow, serve

from flows.cleaning import cleaning
from flows.compensation import compensation
from flows.demotion import demotion
from flows.discovery import discovery
from flows.fetch import fetch
from flows.health import health
from flows.inspection import inspection
from flows.monitor import monitor
from flows.recovery import recovery
from flows.repair import repair
from flows.staging_load import staging_load
from flows.submit import submit
from flows.tier_sinking import tier_sinking
from flows.validation import validation

ALL_FLOWS: list[Flow[..., Any]] = [
    health, discovery, fetch, staging_load, cleaning, validation, demotion, tier_sinking,
    recovery, compensation, monitor, inspection, submit, repair]

if __name__ == "__main__":
    serve(*(f.to_deployment(name=f"{f.name}-local") for f in ALL_FLOWS))  # type: ignore[arg-type]
