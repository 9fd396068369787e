"""The demo, `crawl` and `submit` as a user runs them."""

import os
from pathlib import Path

import pytest
import yaml

from stratacrawl.services import Endpoints
from stratacrawl.sim import SimulatorThread, build_specs
from stratacrawl.sim.crawl_config import sources_document
from tests.support.hosts import hosts
from tests.support.processes import cli, processes_under

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_demo_on_embedded_defaults(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATACRAWL_")}
    env["STRATACRAWL_STATE_DIR"] = str(tmp_path)
    result = cli("demo", env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "pages fetched" in out and "hot  (Redis)" in out and "cold (PostgreSQL)" in out
    staged = [ln for ln in out.splitlines() if "pages staged" in ln]
    assert len(staged) == 3 and all(" 0 pages staged" not in ln for ln in staged)
    assert "format errors 0" in out and "3/3 suites pass" in out, out
    # the demo keeps a state of its own: the platform's (`up`) never sees its ledger
    assert (tmp_path / "demo" / "data_docs" / "index.html").exists()
    assert not (tmp_path / "services.json").exists()
    assert processes_under(tmp_path) == []


@pytest.mark.slow
def test_crawl_and_submit_commands(tmp_path: Path, tier_endpoints: Endpoints,
                                   database_url: str, redis_url: str, es_prefix: str) -> None:
    specs = build_specs(2, 5, first_host=hosts())
    for s in specs:
        s.backlog = 25
    env = {**os.environ, "STRATACRAWL_REDIS_URL": redis_url,
           "STRATACRAWL_DATABASE_URL": database_url,
           "STRATACRAWL_ELASTICSEARCH_URL": tier_endpoints.elasticsearch_url,
           "STRATACRAWL_ES_PLAIN_JSON": "true", "STRATACRAWL_ES_INDEX_PREFIX": es_prefix,
           "STRATACRAWL_STATE_DIR": str(tmp_path / "state")}
    with SimulatorThread(specs):
        sources = tmp_path / "sources.yaml"
        sources.write_text(yaml.safe_dump(sources_document(specs, rate=100.0)))
        result = cli("crawl", "--sources", str(sources), env=env, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "news-1" in result.stdout and "products-2" in result.stdout
        assert "discovered" in result.stdout
        urgent = cli("submit", "--source", "news-1", "--sources", str(sources),
                     specs[0].base_url + "/article/3", "mailto:x@y.z", env=env)
        # The good URL is queued; the refusal is said and fails the command.
        assert urgent.returncode == 2, urgent.stdout + urgent.stderr  # bad input
        assert "queued 1 urgent URL(s) for news-1" in urgent.stdout
        assert "refused 1 of 2 URL(s): scheme-mailto 1" in urgent.stderr
        # Another host's URL is outside news-1's allow scope: refused, nothing queued.
        elsewhere = cli("submit", "--source", "news-1", "--sources", str(sources),
                        specs[1].base_url + "/product/1", env=env)
        assert elsewhere.returncode == 2 and "out-of-scope 1" in elsewhere.stderr
        assert "queued 0 urgent URL(s)" in elsewhere.stdout
        ok = cli("submit", "--source", "news-1", "--sources", str(sources),
                 specs[0].base_url + "/article/4", env=env)
        assert ok.returncode == 0 and "queued 1 urgent URL(s)" in ok.stdout, ok.stderr
        unknown = cli("submit", "--source", "nope", "--sources", str(sources), "http://x/",
                      env=env)
        assert unknown.returncode != 0 and "nope" in unknown.stderr
