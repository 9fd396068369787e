"""prefect.yaml: one deployment per flow, every entrypoint importable, a known work pool."""

import importlib
import re
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


def _schedule_text(schedule: dict[str, object] | None) -> str:
    """How the README's flows table words a deployment's schedule."""
    if schedule is None:
        return "on demand"
    if "interval" in schedule:
        seconds = int(str(schedule["interval"]))
        return {60: "every minute", 3600: "hourly"}.get(seconds, f"every {seconds // 60} min")
    minute, hour, _, _, weekday = str(schedule["cron"]).split()
    if hour == "*":
        return "hourly"
    at = f"{int(hour):02d}:{int(minute):02d} UTC"
    days = ("Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays")
    return at if weekday == "*" else f"{days[int(weekday)]} {at}"


def test_the_readmes_flows_table_lists_every_deployment_and_its_schedule() -> None:
    """Adding a flow step or a deployment is checked end to end: prefect.yaml, serve (above)
    and the README's table of flows agree on each flow's deployments and schedules."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| flow | deployment | schedule | does |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        flow_cell, deployments_cell, schedule_cell = line.split(" | ")[:3]
        for deployment in re.findall(r"`([a-z-]+/[a-z-]+)`", deployments_cell):
            rows[deployment] = (flow_cell.strip("| `"), schedule_cell)
    expected = {}
    for dep in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]:
        path, func = dep["entrypoint"].split(":")
        flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")),
                       func)
        expected[f"{flow.name}/{dep['name']}"] = (flow.name, (dep.get("schedules") or [None])[0])
    assert set(rows) == set(expected), "README's flows table and prefect.yaml differ"
    for name, (flow, schedule) in expected.items():
        assert rows[name][0] == flow, name
        assert _schedule_text(schedule) in rows[name][1], (name, rows[name][1])


def test_the_alert_webhook_url_is_a_secret_of_its_block() -> None:
    """The webhook URL (its token included) came back whole from Prefect's API with
    secrets excluded, while the tier blocks showed ********: it is now a secret the
    block's URL template names, sent as the URL all the same."""
    from deployments.automations import webhook_block

    url = "https://hooks.example.com/services/T000/B000/XoxSecretToken"
    block = webhook_block(url)
    shown = block.model_dump_json()   # what Prefect's API returns without secrets
    assert "XoxSecretToken" not in shown and "{{webhook_url}}" in shown, shown
    assert block._build_request_args("body", "subject")["url"] == url


def test_the_pull_step_finds_the_checkout_from_any_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow run starts in the project folder even where its worker's working directory
    is elsewhere: the checkout the package is installed from holds prefect.yaml."""
    from stratacrawl.stack import set_project_directory

    monkeypatch.delenv("STRATACRAWL_PROJECT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    where = Path(set_project_directory()["directory"])
    assert (where / "prefect.yaml").exists() and Path.cwd() == where
