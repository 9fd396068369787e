"""Default suites and their committed files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratacrawl.errors import ConfigError
from stratacrawl.sources import parse_sources
from stratacrawl.validate.checks import check_query
from stratacrawl.validate.suites import default_suite, load_suite, write_suites

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
DOC = {"sources": [{"id": "shop", "seeds": ["http://h/"], "required": ["name"],
                    "extract": {"kind": "rules", "fields": {
                        "name": {"css": "h1"}, "price": {"css": ".p", "type": "price"},
                        "seen": {"css": "time", "attr": "datetime", "type": "date"}}}}]}


def test_default_suite_covers_every_family() -> None:
    suite = default_suite(parse_sources(DOC).sources[0])
    by_check: dict[str, list[dict[str, object]]] = {}
    for e in suite["expectations"]:
        by_check.setdefault(e["meta"]["check"], []).append(e)
    assert set(by_check) == {"count", "freshness", "completeness", "uniqueness", "sanity"}
    assert [e["kwargs"]["column"] for e in by_check["completeness"]] == ["name"]
    assert {e["kwargs"]["column"] for e in by_check["sanity"]} == {"price", "seen"}


def test_write_keeps_edited_suites_and_load_reads_them(tmp_path: Path) -> None:
    sources = parse_sources(DOC)
    assert write_suites(tmp_path, sources) == [tmp_path / "records.shop.json"]
    path = tmp_path / "records.shop.json"
    doc = json.loads(path.read_text())
    doc["expectations"].append({"type": "expect_column_values_to_match_regex",
                                "kwargs": {"column": "name", "regex": "."}})
    path.write_text(json.dumps(doc))
    assert write_suites(tmp_path, sources) == []
    loaded, generated = load_suite(tmp_path, sources.sources[0])
    assert not generated and loaded["expectations"][-1]["kwargs"]["regex"] == "."


def test_broken_suite_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "records.shop.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"records\.shop\.json: not a readable suite"):
        load_suite(tmp_path, parse_sources(DOC).sources[0])


def test_committed_suites_are_valid_for_the_demo_sources() -> None:
    from stratacrawl.sim import build_specs
    from stratacrawl.sim.crawl_config import sources_document

    sources = parse_sources(sources_document(build_specs(3, 7)))
    for s in sources.sources:
        loaded, generated = load_suite(ROOT / "expectations", s)
        assert not generated, s.id
        assert loaded == {**default_suite(s), "name": loaded["name"]}


def test_check_query_types_the_fields_and_quotes_names() -> None:
    sql = check_query(parse_sources(DOC).sources[0], __import__("datetime").date(2026, 1, 2))
    assert "source_id = 'shop' AND day = '2026-01-02'::date" in sql
    assert "THEN (fields->>'price')::float8 END AS \"price\"" in sql
    assert "NULLIF(fields->>'name', '') AS \"name\"" in sql
