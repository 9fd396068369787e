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
    flow_files = {p.stem for p in (ROOT / "flows").glob("*.py")} - {"__init__", "common",
                                                                   "retries"}
    assert {d["entrypoint"].split("/")[1].split(".")[0] for d in doc["deployments"]} == flow_files


def test_serve_serves_every_deployed_flow() -> None:
    from deployments.serve import ALL_FLOWS

    doc = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    deployed = {d["entrypoint"] for d in doc["deployments"]}
    served = {f"flows/{f.fn.__module__.split('.')[-1]}.py:{f.fn.__name__}" for f in ALL_FLOWS}
    assert served == deployed


def test_maintenance_deployments_run_one_at_a_time() -> None:
    """Prefect, not only a lock in PostgreSQL, keeps a second run from starting."""
    doc = {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())[
        "deployments"]}
    for name in ("demotion", "tier-sinking", "recovery", "compensation"):
        assert doc[name]["concurrency_limit"] == {"limit": 1, "collision_strategy": "CANCEL_NEW"}
    assert doc["fetch"]["concurrency_limit"]["limit"] >= 3  # the load test runs three hosts


def test_blocks_are_registered_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """``up`` saves a block per tier the environment names, read through ``Settings``
    (the one place STRATACRAWL_* variables are read): no URL, no block."""
    from blocks.connections import ElasticsearchConnection, RedisConnection
    from deployments import bootstrap

    saved: dict[str, object] = {}
    monkeypatch.setattr(RedisConnection, "save", lambda self, name, overwrite: saved.update(
        {name: self}))
    monkeypatch.setattr(ElasticsearchConnection, "save",
                        lambda self, name, overwrite: saved.update({name: self}))
    for name in ("DATABASE_URL", "SOURCES", "REDIS_URL", "ELASTICSEARCH_URL"):
        monkeypatch.delenv(f"STRATACRAWL_{name}", raising=False)
    monkeypatch.setenv("STRATACRAWL_REDIS_URL", "redis://r:6379/0")
    monkeypatch.setenv("STRATACRAWL_REDIS_CLUSTER", "true")
    monkeypatch.setenv("STRATACRAWL_ELASTICSEARCH_URL", "http://es:9200")
    monkeypatch.setenv("STRATACRAWL_ES_PLAIN_JSON", "true")
    monkeypatch.setenv("STRATACRAWL_ES_INDEX_PREFIX", "p_")
    assert bootstrap.register() == ["stratacrawl-redis", "stratacrawl-elasticsearch"]
    redis, es = saved["stratacrawl-redis"], saved["stratacrawl-elasticsearch"]
    assert isinstance(redis, RedisConnection) and redis.cluster
    assert redis.url.get_secret_value() == "redis://r:6379/0"
    assert isinstance(es, ElasticsearchConnection) and es.plain_json
    assert es.index_prefix == "p_"
