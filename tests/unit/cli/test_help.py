"""The help as a person reads it in an 80-column terminal: plain paragraphs, hints as the
user types them, every command listed by a whole clause."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from typing import Any

import pytest

from stratacrawl.cli.app import command
from stratacrawl.cli.help import first_clause

pytestmark = pytest.mark.unit


def _paths(cmd: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subs = getattr(cmd, "commands", {})
    return [path] + [p for name, sub in subs.items() for p in _paths(sub, (*path, name))]


def _help(args: tuple[str, ...]) -> str:
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as exited:
        command().main([*args, "--help"], prog_name="stratacrawl")
    assert exited.value.code == 0, out.getvalue()
    return out.getvalue()


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def test_every_help_is_plain_text_with_conventional_hints() -> None:
    tree = command()
    paths = _paths(tree)
    assert len(paths) > 30 and ("submit",) in paths and ("sim", "serve") in paths
    for path in paths:
        text = _help(path)
        where = " ".join(path) or "stratacrawl"
        assert not re.search(r"[╭│╰─]", text), f"{where}: boxed help"
        assert not re.search(r"<(bool|str|int|float|path|list\[[a-z]+\])[^>]*>", text), \
            f"{where}: a type hint in angle brackets:\n{text}"
        assert "{" not in text.split("\n\n", 1)[0], f"{where}: braces in the usage line"
        assert max(len(line) for line in text.splitlines()) <= 80, f"{where}:\n{text}"


def test_hints_read_as_typed() -> None:
    submit = _help(("submit",))
    assert "Usage: stratacrawl submit [OPTIONS] URLS..." in submit
    assert re.search(r"^  URLS\.\.\.\s+URLs to crawl urgently", submit, re.M)
    assert re.search(r"^  --source SOURCE\s+Source id\.", submit, re.M)
    crawl = _help(("crawl",))
    assert re.search(r"^  --seconds SECONDS\s", crawl, re.M)
    assert re.search(r"^  --json\s+JSON lines", crawl, re.M)        # a flag: no hint
    assert "--until-idle / --forever" in crawl
    assert re.search(r"^  --format FORMAT\s", _help(("export",)), re.M)


def test_commands_are_listed_by_their_first_clause() -> None:
    top = _help(())
    assert re.search(r"^  doctor\s+Check each tier, Prefect and the sources file$", top, re.M)
    assert "..." not in top.split("Commands:")[1]   # no short help cut off at a fixed width
    assert first_clause("The rules (per source: state, support); and more.") == \
        "The rules (per source: state, support)"
    assert first_clause("Serve the sources until SIGINT/SIGTERM.") == \
        "Serve the sources until SIGINT/SIGTERM"
