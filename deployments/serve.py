"""Serve every flow from this process (no work pool): ``python -m deployments.serve``.

For development; production uses ``prefect deploy`` with ``prefect.yaml`` and workers.
"""

from __future__ import annotations

from prefect import serve

from flows.health import health

ALL_FLOWS = [health]

if __name__ == "__main__":
    serve(*(f.to_deployment(name=f"{f.name}-local") for f in ALL_FLOWS))
