"""clean → validate → export → alerts as a user runs them, and the Data Docs in a browser."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
import yaml

from stratacrawl.services import Endpoints
from stratacrawl.services.embedded import free_port
from stratacrawl.sim import SimulatorThread, build_specs
from stratacrawl.sim.crawl_config import sources_document
from tests.support.hosts import hosts
from tests.support.processes import cli, dump_dom, require_chromium, screenshot

pytestmark = pytest.mark.e2e
@pytest.fixture
def env(tmp_path: Path, tier_endpoints: Endpoints, database_url: str, redis_url: str,
        es_prefix: str) -> dict[str, str]:
    return {**os.environ, "STRATACRAWL_REDIS_URL": redis_url,
            "STRATACRAWL_DATABASE_URL": database_url,
            "STRATACRAWL_ELASTICSEARCH_URL": tier_endpoints.elasticsearch_url,
            "STRATACRAWL_ES_PLAIN_JSON": "true", "STRATACRAWL_ES_INDEX_PREFIX": es_prefix,
            "STRATACRAWL_STATE_DIR": str(tmp_path / "state"),
            "STRATACRAWL_DATA_DOCS_DIR": str(tmp_path / "docs")}


@pytest.mark.slow
def test_clean_validate_export_and_data_docs(tmp_path: Path, env: dict[str, str]) -> None:
    specs = build_specs(2, 5, first_host=hosts())
    for s in specs:
        s.backlog = 30
        s.publish_every_s = 3600.0
    with SimulatorThread(specs) as st:
        sources = tmp_path / "sources.yaml"
        sources.write_text(yaml.safe_dump(sources_document(specs, rate=100.0)))
        assert cli("crawl", "--sources", str(sources), env=env, timeout=300).returncode == 0
        truth = st.sim.truth()
    cleaned = cli("clean", "--sources", str(sources), env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "news-1" in cleaned.stdout and "products-2" in cleaned.stdout

    checked = cli("validate", "--sources", str(sources), env=env, timeout=180)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("pass") >= 2
    # the same reports as JSON, for scripts: one document each
    report = json.loads(cli("validate", "--sources", str(sources), "--json", env=env,
                            timeout=180).stdout)
    assert report["success"] is True
    assert {r["source_id"] for r in report["results"]} == {"news-1", "products-2"}
    assert all(c["success"] for r in report["results"] for c in r["checks"])
    again = json.loads(cli("clean", "--sources", str(sources), "--json", env=env).stdout)
    assert again["stats"]["pages"] == 0  # everything was cleaned above
    known = cli("lookup", truth["news-1"][0]["url"], env=env)
    assert known.returncode == 0, known.stderr
    assert "answered by" in known.stdout and "also in hot" in known.stdout, known.stdout
    missing = cli("lookup", "http://127.0.0.1:9/nowhere", "--json", env=env)
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {"url": "http://127.0.0.1:9/nowhere", "found": False}
    bad_day = cli("validate", "--sources", str(sources), "--day", "2026-13-01", env=env)
    assert bad_day.returncode == 2 and "not a day" in bad_day.stderr

    out = tmp_path / "products.jsonl"
    done = cli("export", "--source", "products-2", "--since", "2000-01-01", "--format", "jsonl",
               "--out", str(out), "--sources", str(sources), env=env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    want = {it["url"]: it for it in truth["products-2"]}
    assert {r["url"] for r in rows} == set(want)
    assert all(r["fields"]["price"] == want[r["url"]]["price"] and r["source"] == "products-2"
               and r["crawled_at"] for r in rows)
    as_csv = cli("export", "--source", "products-2", "--since", "2000-01-01", "--format", "csv",
                 "--sources", str(sources), env=env)
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(table) == len(rows) and {"url", "name", "price", "stock"} <= set(table[0])
    parquet = tmp_path / "news.parquet"
    assert cli("export", "--source", "news-1", "--since", "2000-01-01", "--format", "parquet",
               "--out", str(parquet), "--sources", str(sources), env=env).returncode == 0
    frame = pq.read_table(parquet)
    assert frame.num_rows == len(truth["news-1"]) and "published" in frame.column_names
    # times and days are typed columns (they were strings)
    assert str(frame.schema.field("crawled_at").type) == "timestamp[us, tz=UTC]"
    assert str(frame.schema.field("day").type) == "date32[day]"
    refused = cli("export", "--source", "news-1", "--since", "2000-01-01", "--format", "parquet",
                  "--sources", str(sources), env=env)
    assert refused.returncode != 0 and "--out" in refused.stderr

    alerts = cli("alerts", env=env)
    assert alerts.returncode == 0 and "0 open alert(s)" in alerts.stdout

    # `docs serve`: the reports over HTTP (a browser follows an http link, not file://)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "stratacrawl", "docs", "serve", "--port",
                               str(port)], env=env, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert f"http://127.0.0.1:{port}/" in (server.stdout.readline() if server.stdout else "")
        newest = max((tmp_path / "docs" / "validations").rglob("*.html"),
                     key=lambda p: p.stat().st_mtime).relative_to(tmp_path / "docs")
        for path in ("index.html", newest.as_posix()):
            answer = httpx.get(f"http://127.0.0.1:{port}/{path}", timeout=10)
            assert answer.status_code == 200 and "<html" in answer.text.lower(), path
    finally:
        server.terminate()
        server.wait(10)
    assert json.loads(cli("alerts", "--json", env=env).stdout) == []

    require_chromium()
    docs = tmp_path / "docs"
    # Offline (no host name resolves): every asset comes from the site itself.
    index = dump_dom(docs / "index.html", tmp_path / "chromium", offline=True)
    assert "records.news-1" in index and "records.products-2" in index
    pages = list((docs / "validations" / "records" / "products-2").rglob("*.html"))
    assert len(pages) == 2  # `validate` and `validate --json` above: one result page each
    validations = len(list((docs / "validations").rglob("*.html")))
    assert 'class="bootstrap-table' in index           # its JavaScript ran
    rows = re.findall(r'<tr [^>]*data-href="validations/[^"]+"[^>]*data-index=', index)
    assert len(rows) == validations   # the validation table has a row per validation
    shot = screenshot(docs / "index.html", tmp_path / "chromium", tmp_path / "index.png",
                      offline=True)
    assert _green_pixels(shot) > 100   # the pass icons: Font Awesome and Bootstrap's colours
    page = max(pages, key=lambda p: p.stat().st_mtime)
    shown = dump_dom(page, tmp_path / "chromium", offline=True)
    assert "records.products-2" in shown and "Succeeded" in shown
    for column in ("record_url", "name", "price"):
        assert column in shown


def _green_pixels(png: Path) -> int:
    from PIL import Image

    with Image.open(png) as im:
        return sum(1 for r, g, b in im.convert("RGB").getdata() if g > 140 and r < 90 and b < 120)


@pytest.mark.slow
def test_a_failed_day_is_held_back_from_export_until_it_passes(
        tmp_path: Path, env: dict[str, str], database_url: str) -> None:
    """The quality gate: a source-day whose last validation failed is not exported (the
    export names it and its failed checks) unless --include-failed; a re-clean and a passing
    re-validation release it."""
    import psycopg

    specs = build_specs(2, 5, first_host=hosts())
    for s in specs:
        s.backlog, s.publish_every_s = 20, 3600.0
    with SimulatorThread(specs):
        sources = tmp_path / "sources.yaml"
        sources.write_text(yaml.safe_dump(sources_document(specs, rate=100.0)))
        assert cli("crawl", "--sources", str(sources), env=env, timeout=300).returncode == 0
    assert cli("clean", "--sources", str(sources), env=env).returncode == 0
    sid = specs[1].id   # products-2
    with psycopg.connect(database_url, autocommit=True) as conn:  # a broken extraction
        total = conn.execute("UPDATE records SET fields = fields - 'price' "
                             "WHERE source_id = %s", (sid,)).rowcount
    assert total > 0
    failed = cli("validate", "--sources", str(sources), "--json", env=env, timeout=180)
    assert failed.returncode == 1, failed.stderr
    (result,) = [r for r in json.loads(failed.stdout)["results"] if r["source_id"] == sid]
    assert [(c["check"], c["column"]) for c in result["checks"] if not c["success"]] == [
        ("completeness", "price")]

    def export(*extra: str) -> tuple[int, str]:
        out = tmp_path / "out.jsonl"
        done = cli("export", "--source", sid, "--since", "2000-01-01", "--out", str(out),
                   "--sources", str(sources), *extra, env=env)
        assert done.returncode == 0, done.stderr
        return len(out.read_text().splitlines()), done.stderr

    held, said = export()
    assert held == 0 and "held back" in said and "completeness price" in said
    assert export("--include-failed")[0] == total
    today = datetime.now(UTC).date().isoformat()
    assert cli("clean", "--sources", str(sources), "--reclean", "--source", sid, "--day", today,
               env=env).returncode == 0
    passed = cli("validate", "--sources", str(sources), env=env, timeout=180)
    assert passed.returncode == 0, passed.stdout
    assert export() == (total, "")


@pytest.mark.slow
def test_sigterm_at_any_phase_of_validate_exits_143_cleanly(tmp_path: Path,
                                                            env: dict[str, str]) -> None:
    """SIGTERM to `validate` while it imports, connects, runs its checkpoints, writes its
    Data Docs or prints: it exits 143 (or had finished: 0/1) with its finally blocks run,
    never killed by the signal (-15) and never with a traceback."""
    import signal
    import time

    specs = build_specs(1, 5, first_host=hosts())
    specs[0].backlog = 10
    specs[0].publish_every_s = 3600.0
    with SimulatorThread(specs):
        sources = tmp_path / "sources.yaml"
        sources.write_text(yaml.safe_dump(sources_document(specs, rate=100.0)))
        assert cli("crawl", "--sources", str(sources), env=env, timeout=300).returncode == 0
    assert cli("clean", "--sources", str(sources), env=env).returncode == 0
    t0 = time.monotonic()
    whole = cli("validate", "--sources", str(sources), env=env, timeout=180)
    took = time.monotonic() - t0
    assert whole.returncode in (0, 1), whole.stderr
    codes = []
    for share in (0.05, 0.2, 0.4, 0.6, 0.8, 0.95):
        proc = subprocess.Popen([sys.executable, "-m", "stratacrawl", "validate", "--sources",
                                 str(sources)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(took * share)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        codes.append(proc.returncode)
        assert proc.returncode in (0, 1, 143), (share, proc.returncode, err[-3000:])
        assert "Traceback" not in err, (share, err[-3000:])
    assert 143 in codes, codes
