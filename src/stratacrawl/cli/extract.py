"""``stratacrawl extract learn`` and ``extract apply``: field rules learned from example
pages and values, and rules applied to pages as the cleaner applies them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import ValidationError

from stratacrawl.cli.common import EXIT_FAILED, bad_input, console, emit_json, err
from stratacrawl.cli.help import group

app = group("Extraction rules: learn them from examples, apply them to pages.")


def _examples(pages: Path, examples: Path) -> list[Any]:
    """The examples of ``examples`` (JSON lines) with their pages read from ``pages``;
    every problem named with its line."""
    from stratacrawl.clean.learn import Example

    if not pages.is_dir():
        bad_input(f"--pages {pages}: not a folder")
    try:
        lines = examples.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        bad_input(f"--examples {examples}: {e.strerror}")
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{examples}:{n}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as e:
            bad_input(f"{where}: not JSON ({e.msg})")
        if (not isinstance(doc, dict) or not isinstance(doc.get("page"), str)
                or not isinstance(doc.get("fields"), dict) or not doc["fields"]):
            bad_input(f'{where}: want {{"page": "<file in {pages}>", "fields": {{"name": '
                      'value, …}}')
        page = (pages / doc["page"]).resolve()
        if pages.resolve() not in page.parents:
            bad_input(f"{where}: page {doc['page']!r} is not a file in {pages}")
        try:
            html = page.read_bytes()
        except OSError as e:
            bad_input(f"{where}: page {doc['page']!r}: {e.strerror}")
        out.append(Example(doc["page"], str(doc.get("url") or page.as_uri()), html,
                           doc["fields"]))
    if not out:
        bad_input(f"--examples {examples}: no examples")
    return out


@app.command("learn")
def learn_cmd(
        pages: Path = typer.Option(..., "--pages", help="Folder of the example pages (HTML)."),
        examples: Path = typer.Option(..., "--examples", help=(
            'JSON lines: {"page": "<file name in --pages>", "fields": {"name": "…", '
            '"price": 1299.0, …}} — values typed as records hold them (a price a number, a '
            'date ISO 8601); "url" (optional) is where the page was fetched from.')),
        out: Path = typer.Option(..., "--out", help="Where to write the extract: block (YAML)."),
        as_json: bool = typer.Option(False, "--json", help="The report as JSON."),
) -> None:
    """Learn each field's rule from the examples: the most stable rule right on every
    example (schema.org JSON-LD or microdata, a label, stable attributes, classes,
    positions), checked on examples held back one at a time. Writes an ``extract:`` block
    a sources file accepts; exits 1 naming the examples a field's closest rule disagrees
    with when no rule explains them all (the other fields are still written)."""
    from stratacrawl.clean.learn import learn

    learned = learn(_examples(pages, examples))
    block = learned.extract_block()
    if block["fields"]:
        out.write_text(yaml.safe_dump({"extract": block}, sort_keys=False, allow_unicode=True),
                       encoding="utf-8")
    if as_json:
        emit_json({"out": str(out) if block["fields"] else None, "ok": learned.ok, "fields": {
            name: {"rule": f.rule.model_dump(exclude_none=True) if f.rule else None,
                   "kind": f.kind, "type": f.type, "precision": f.precision,
                   "recall": f.recall, "held_back": f.held_back, "disagree": f.disagree}
            for name, f in learned.fields.items()}})
    else:
        for f in learned.fields.values():
            (console if f.rule is not None else err).print(f.describe(), highlight=False,
                                                           markup=False)
        if block["fields"]:
            console.print(f"wrote {out}", highlight=False)
    if not learned.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command("apply")
def apply_cmd(
        rules: Path = typer.Option(..., "--rules", help="A YAML file with an extract: block."),
        pages: Path = typer.Option(..., "--pages", help="Folder of pages (HTML)."),
        as_json: bool = typer.Option(True, "--json/--table", help="JSON lines (default)."),
) -> None:
    """Each page's fields as the cleaner would store them (typed), one JSON line a page:
    ``{"page": "<file name>", "fields": {…}}`` (a page the rules find nothing on has
    ``{}``)."""
    from stratacrawl.clean.extract import Page, RulesExtractor
    from stratacrawl.sources import RulesExtract

    try:
        doc = yaml.safe_load(rules.read_text(encoding="utf-8"))
    except OSError as e:
        bad_input(f"--rules {rules}: {e.strerror}")
    except yaml.YAMLError as e:
        bad_input(f"--rules {rules}: not YAML ({e})")
    block = doc.get("extract", doc) if isinstance(doc, dict) else None
    try:
        config = RulesExtract.model_validate(block)
    except ValidationError as e:
        bad_input(f"--rules {rules}: " + "; ".join(
            f"{'.'.join(map(str, x['loc'])) or 'extract'}: "
            f"{x['msg'].removeprefix('Value error, ')}" for x in e.errors()))
    if not pages.is_dir():
        bad_input(f"--pages {pages}: not a folder")
    extractor = RulesExtractor(config)
    for path in sorted(p for p in pages.iterdir() if p.is_file()):
        found = extractor.extract(Page(path.resolve().as_uri(), "text/html", path.read_bytes()))
        fields = found[0].fields if found else {}
        if as_json:
            print(json.dumps({"page": path.name, "fields": fields}, ensure_ascii=False),
                  flush=True)
        else:
            console.print(f"{path.name}: " + ", ".join(f"{k}={v!r}" for k, v in fields.items()),
                          highlight=False, markup=False)
