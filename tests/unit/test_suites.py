"""The default suite, the committed GX project and the offline Data Docs assets."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from stratacrawl.cold.records import asset_query
from stratacrawl.settings import Settings
from stratacrawl.sources import parse_sources
from stratacrawl.validate import datadocs
from stratacrawl.validate.project import open_project, write_source
from stratacrawl.validate.suites import CHECKS, default_expectations

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
DOC = {"sources": [{"id": "shop", "seeds": ["http://h/"], "required": ["name"],
                    "extract": {"kind": "rules", "fields": {
                        "name": {"css": "h1"}, "price": {"css": ".p", "type": "price"},
                        "seen": {"css": "time", "attr": "datetime", "type": "date"},
                        "link": {"css": "a", "attr": "href", "type": "url"}}}}]}


def test_default_suite_covers_every_family() -> None:
    by_check: dict[str, list[dict[str, object]]] = {}
    for e in default_expectations(parse_sources(DOC).sources[0]):
        by_check.setdefault(e["meta"]["check"], []).append(e)
    assert tuple(sorted(by_check)) == tuple(sorted(CHECKS))
    assert [e["kwargs"]["column"] for e in by_check["completeness"]] == ["name"]
    assert {(e["type"].removeprefix("expect_column_values_to_"), e["kwargs"]["column"])
            for e in by_check["validity"]} == {
        ("match_regex", "price"), ("be_between", "price__number"),
        ("match_regex", "seen"), ("be_between", "seen__time"), ("match_regex", "link")}
    assert [e["kwargs"]["column"] for e in by_check["uniqueness"]] == ["record_url"]


def test_asset_query_types_the_fields_and_quotes_names() -> None:
    source = parse_sources(DOC).sources[0]
    sql = asset_query(source.id, source.field_types)
    assert "FROM records WHERE source_id = 'shop'" in sql
    assert "NULLIF(btrim(fields->>'name'), '') AS \"name\"" in sql
    assert "::float8 END AS \"price__number\"" in sql
    assert "::timestamptz END AS \"seen__time\"" in sql
    assert "NOT EXISTS" in sql   # an empty day still has its (NULL) row


def _demo_sources() -> list[object]:
    from stratacrawl.sim import build_specs
    from stratacrawl.sim.crawl_config import sources_document

    return list(parse_sources(sources_document(build_specs(3, 7))).sources)


def test_the_committed_project_is_what_init_writes_for_the_demo_sources(
        tmp_path: Path) -> None:
    shutil.copytree(ROOT / "expectations", tmp_path / "exp")
    settings = Settings(expectations_dir=tmp_path / "exp", state_dir=tmp_path / "state")
    context = open_project(settings)
    for source in _demo_sources():
        assert write_source(context, source) == [], source  # type: ignore[arg-type]
        name = f"records.{source.id}"  # type: ignore[attr-defined]
        checkpoint = context.checkpoints.get(name)
        assert [d.name for d in checkpoint.validation_definitions] == [name]
        assert [a.site_names for a in checkpoint.actions] == [["stratacrawl"]]
    config = (ROOT / "expectations" / "gx" / "great_expectations.yml").read_text()
    for variable in ("STRATACRAWL_GX_DATABASE_URL", "STRATACRAWL_GX_RESULTS_DIR",
                     "STRATACRAWL_DATA_DOCS_DIR"):
        assert "${" + variable + "}" in config
    assert "postgresql://" not in config and "OfflineSiteBuilder" in config


def test_an_edited_suite_is_kept_and_changed_fields_rewrite_the_asset(tmp_path: Path) -> None:
    import great_expectations as gx

    shutil.copytree(ROOT / "expectations", tmp_path / "exp")
    context = open_project(Settings(expectations_dir=tmp_path / "exp"))
    shop = parse_sources(DOC).sources[0]
    assert write_source(context, shop) == ["asset", "suite", "validation definition",
                                           "checkpoint"]
    suite = context.suites.get("records.shop")
    suite.add_expectation(gx.expectations.ExpectColumnValuesToMatchRegex(column="name",
                                                                         regex="."))
    suite.save()
    assert write_source(context, shop) == []
    doc = json.loads(json.dumps(DOC))
    doc["sources"][0]["extract"]["fields"]["stock"] = {"css": ".s", "type": "int"}
    grown = parse_sources(doc).sources[0]
    assert write_source(context, grown) == ["asset", "validation definition", "checkpoint"]
    assert "stock__number" in context.data_sources.get("stratacrawl").get_asset(
        "records.shop").query
    kept = context.suites.get("records.shop")
    assert any(getattr(e, "regex", None) == "." for e in kept.expectations)  # the hand edit


def test_every_remote_asset_of_gx_templates_is_vendored() -> None:
    import great_expectations

    templates = Path(great_expectations.__file__).parent / "render" / "view"
    remote = re.compile(r"""(?:src|href)=["']https?://[^"']+\.(?:js|css)["']|"""
                        r"""<script[^>]+src=["']https?://|url\(['"]?https?://""")
    for path in [*templates.glob("templates/*.j2"), *templates.glob("static/styles/*.css")]:
        rewritten = datadocs.rewrite(path.read_text(encoding="utf-8"))
        assert not remote.search(rewritten), path.name
        assert datadocs.LOGO_BUCKET not in rewritten, path.name
    manifest = json.loads((datadocs.VENDOR / "MANIFEST.json").read_text())
    for package, (version, files) in datadocs.PACKAGES.items():
        entry = manifest[package]
        assert entry["version"] == version and set(files) <= set(entry["files"])
        for name, digest in entry["files"].items():
            data = (datadocs.VENDOR / entry["folder"] / name).read_bytes()
            assert hashlib.sha256(data).hexdigest() == digest, name
    for package, path in datadocs.REMOTE.values():
        assert (datadocs.VENDOR / datadocs.vendor_dir(package) / path).is_file()
