"""prefect.yaml: one deployment per flow, every entrypoint importable, a known work pool."""

import importlib
from pathlib import Path

import pytest
import yaml
from prefect import Flow

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def test_every_deployment_points_at_a_flow() -> None:
    doc = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    names = []
    for dep in doc["deployments"]:
        path, func = dep["entrypoint"].split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert isinstance(getattr(module, func), Flow), dep["entrypoint"]
        assert dep["work_pool"]["name"] == "stratacrawl"
        names.append(dep["name"])
    assert len(names) == len(set(names))
    flow_files = {p.stem for p in (ROOT / "flows").glob("*.py")} - {"__init__", "common"}
    assert {d["entrypoint"].split("/")[1].split(".")[0] for d in doc["deployments"]} == flow_files
