"""Pause (or resume) the schedules of the deployments whose flows read the sources file.

``stratacrawl up`` runs ``python -m deployments.schedules pause`` when there is no sources
file: discovery, fetch, cleaning, validation, monitor and tier-sinking would otherwise
fail every time they are scheduled. The maintenance deployments (health, recovery,
demotion, compensation, staging-load, inspection) keep running. ``resume`` switches the
paused schedules back on; ``stratacrawl up`` with a sources file deploys ``prefect.yaml``
again, which does the same.
"""

from __future__ import annotations

import asyncio
import sys

from prefect.client.orchestration import get_client
from prefect.client.schemas.responses import DeploymentResponse

SOURCES_PARAMETER = "sources_file"


def reads_sources(deployment: DeploymentResponse) -> bool:
    schema = deployment.parameter_openapi_schema or {}
    return SOURCES_PARAMETER in (schema.get("properties") or {})


async def set_active(active: bool) -> list[str]:
    """Switch the schedules of every sources-reading deployment; returns their names."""
    changed = []
    async with get_client() as client:
        for dep in await client.read_deployments():
            if not reads_sources(dep) or not dep.schedules:
                continue
            for schedule in dep.schedules:
                if schedule.active != active:
                    await client.update_deployment_schedule(dep.id, schedule.id, active=active)
            changed.append(dep.name)
    return sorted(changed)


if __name__ == "__main__":
    if sys.argv[1:] not in (["pause"], ["resume"]):
        sys.exit("usage: python -m deployments.schedules pause|resume")
    names = asyncio.run(set_active(sys.argv[1] == "resume"))
    print(f"{sys.argv[1]}d: " + (", ".join(names) or "none"))
