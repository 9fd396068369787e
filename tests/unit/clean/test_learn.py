"""The rule learner over a corpus of layouts the site simulator never renders (generated
class names with extra wrappers, a label table in a different row order on every page,
values only in microdata or JSON-LD, values in data attributes), each with related
products as distractors on every page: rules learned from 8 examples are right on the
other pages; typed values are matched however the page formats them; examples no rule
explains are refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stratacrawl.clean.extract import Page, RulesExtractor
from stratacrawl.clean.learn import Example, field_type, learn, same
from stratacrawl.sources import RulesExtract, parse_sources
from tests.support.layouts import FIELDS, LAYOUTS, pages

pytestmark = pytest.mark.unit
EXAMPLES, OTHERS = 8, 20


def _examples(layout_pages: list[tuple[str, bytes, dict[str, Any]]]) -> list[Example]:
    return [Example(n, f"http://shop.test/{n}", h, f) for n, h, f in layout_pages]


# the most stable kind of rule each layout allows, per field
EXPECTED_KINDS = {
    "hashed": {"generated name"},
    "label_table": {"label"},
    "microdata": {"microdata"},
    "jsonld": {"jsonld"},
    "data_attributes": {"attribute", "class"},
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_rules_learned_from_eight_pages_are_right_on_the_others(layout: str) -> None:
    corpus = pages(layout, EXAMPLES + OTHERS)
    learned = learn(_examples(corpus[:EXAMPLES]))
    assert learned.ok, [f.describe() for f in learned.fields.values()]
    assert set(learned.fields) == set(FIELDS[layout])
    for f in learned.fields.values():
        assert f.kind in EXPECTED_KINDS[layout], f.describe()
        assert (f.precision, f.recall, f.held_back) == (1.0, 1.0, EXAMPLES), f.describe()
    # the block is what a sources file accepts, and the cleaner's extractor applies it
    source = parse_sources({"sources": [{"id": "shop", "seeds": ["http://shop.test/"],
                                         "extract": learned.extract_block()}]}).sources[0]
    extractor = RulesExtractor(source.extract)   # type: ignore[arg-type]
    right = total = 0
    for name, html, truth in corpus[EXAMPLES:]:
        (got,) = extractor.extract(Page(f"http://shop.test/{name}", "text/html", html))
        for field, want in truth.items():
            total += 1
            right += same(field_type([want]), got.fields.get(field), want)
    assert right / total >= 0.95, (layout, right, total)


def test_values_are_matched_by_type_however_the_page_writes_them() -> None:
    html = ("<html><body><div class=a><span class=price>USD 1,299.00</span></div>"
            "<div class=b><span class=price>1.299,00 €</span></div>"
            "<p class=when>March 5, 2026</p><p class=count>1,024 left</p></body></html>")
    pages_ = [Example(f"p{i}.html", f"http://x.test/{i}", html.encode(), {
        "price": 1299.0, "listed": "2026-03-05", "stock": 1024}) for i in range(3)]
    learned = learn(pages_)
    assert learned.ok, [f.describe() for f in learned.fields.values()]
    assert learned.fields["price"].rule.type == "price"
    assert learned.fields["listed"].rule.type == "date"
    assert learned.fields["stock"].rule.type == "int"
    assert field_type([1, 2.5]) == "price" and field_type(["2026-01-02T03:04:05Z"]) == "datetime"


def test_examples_no_rule_explains_are_refused_by_name() -> None:
    corpus = pages("label_table", 6)
    examples = _examples(corpus)
    wrong = examples[4]
    examples[4] = Example(wrong.page, wrong.url, wrong.html, {**wrong.fields, "price": 13.0})
    learned = learn(examples)
    assert not learned.ok
    price = learned.fields["price"]
    assert price.rule is None and price.fits == 5 and price.examples == 6
    assert len(price.disagree) == 1 and price.disagree[0].startswith(f"{wrong.page}: ")
    assert "13.0" in price.disagree[0]
    assert learned.fields["sku"].rule is not None           # the other fields still learn
    assert "price" not in learned.extract_block()["fields"]


def test_learn_and_apply_from_the_command_line(tmp_path: Path) -> None:
    corpus = pages("jsonld", 12)
    folder = tmp_path / "pages"
    folder.mkdir()
    for name, html, _ in corpus:
        (folder / name).write_bytes(html)
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(json.dumps({"page": n, "fields": f}) + "\n"
                                for n, _, f in corpus[:8]))
    rules = tmp_path / "rules.yaml"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "stratacrawl", "extract", *args],
                              capture_output=True, text=True, timeout=120)

    done = run("learn", "--pages", str(folder), "--examples", str(examples), "--out",
               str(rules), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["fields"]["price"]["rule"] == {
        "jsonld": "Product.offers.price", "type": "price"}
    assert report["fields"]["price"]["precision"] == 1.0
    RulesExtract.model_validate(yaml.safe_load(rules.read_text())["extract"])
    applied = run("apply", "--rules", str(rules), "--pages", str(folder))
    assert applied.returncode == 0, applied.stderr
    lines = [json.loads(line) for line in applied.stdout.splitlines()]
    assert [x["page"] for x in lines] == [n for n, _, _ in corpus]
    assert all(x["fields"] == f for x, (_, _, f) in zip(lines, corpus, strict=True))
    # an example whose value is not on its page: exit 1, named
    examples.write_text(json.dumps({"page": corpus[0][0], "fields": {"sku": "NOPE-1"}}) + "\n"
                        + json.dumps({"page": corpus[1][0], "fields": {"sku": corpus[1][2][
                            "sku"]}}) + "\n")
    refused = run("learn", "--pages", str(folder), "--examples", str(examples), "--out",
                  str(tmp_path / "none.yaml"))
    assert refused.returncode == 1
    assert f"{corpus[0][0]}: 'NOPE-1' is nowhere on the page" in refused.stderr, refused.stderr
    # bad input: named, exit 2
    examples.write_text('{"page": "../etc/passwd", "fields": {"a": 1}}\n')
    bad = run("learn", "--pages", str(folder), "--examples", str(examples), "--out",
              str(rules))
    assert bad.returncode == 2 and "is not a file in" in bad.stderr, bad.stderr
