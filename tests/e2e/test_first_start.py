"""First starts race: several crawls started at once on a fresh database and a fresh warm
tier all migrate, create their weekly indices and crawl, with no crash and no traceback."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml

from stratacrawl.cold import db
from stratacrawl.services import Endpoints
from stratacrawl.sim import SimulatorThread
from stratacrawl.sim.crawl_config import sources_document
from tests.support.hosts import hosts
from tests.support.sites import small_site

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
TRIALS = 4
AT_ONCE = 3


def test_three_crawls_started_at_once_on_a_fresh_state(
        tmp_path: Path, tier_endpoints: Endpoints, redis_url: str) -> None:
    specs = small_site(1, hosts(), backlog=4)
    admin = db.libpq_url(tier_endpoints.database_url)
    with SimulatorThread(specs):
        sources = tmp_path / "sources.yaml"
        sources.write_text(yaml.safe_dump(sources_document(specs, rate=100.0)))
        for trial in range(TRIALS):
            name = f"t_first_{uuid.uuid4().hex[:10]}"
            url = db.recreate_database(admin, name)   # empty: no schema yet
            env = {**os.environ, "STRATACRAWL_REDIS_URL": redis_url,
                   "STRATACRAWL_DATABASE_URL": url,
                   "STRATACRAWL_ELASTICSEARCH_URL": tier_endpoints.elasticsearch_url,
                   "STRATACRAWL_ES_PLAIN_JSON": "true",
                   "STRATACRAWL_ES_INDEX_PREFIX": f"first{uuid.uuid4().hex[:8]}-",
                   "STRATACRAWL_STATE_DIR": str(tmp_path / f"state{trial}")}
            try:
                procs = [subprocess.Popen(
                    [sys.executable, "-m", "stratacrawl", "crawl", "--sources", str(sources),
                     "--worker-id", f"w{i}", "--seconds", "60"],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    for i in range(AT_ONCE)]
                outs = [p.communicate(timeout=240) for p in procs]
                for p, (out, err) in zip(procs, outs, strict=True):
                    assert p.returncode == 0, (trial, p.returncode, out[-2000:], err[-3000:])
                    assert "Traceback" not in err, err[-3000:]
            finally:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
