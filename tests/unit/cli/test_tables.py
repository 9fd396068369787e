"""CLI tables as a person reads them in an 80-column terminal."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rich.console import Console

from stratacrawl.cli.common import short_url
from stratacrawl.cli.crawl import rules_table
from stratacrawl.cli.monitor import trace_table
from stratacrawl.cold.url_rules import RuleRow

pytestmark = pytest.mark.unit

LONG = "http://127.0.0.11:40123/catalogue/category/outdoor-equipment/page/7/item/article-12345?ref=nav"


def rendered(table: object, column: int) -> tuple[str, str]:
    """The table at 80 columns: its text, and the body cells of ``column`` (0-based) read
    on across the lines they are folded over."""
    console = Console(width=80, record=True, force_terminal=False)
    console.print(table)
    text = console.export_text()
    assert text.rstrip().endswith("┘"), text     # nothing cut off at the right edge
    body = [ln for ln in text.splitlines() if ln.startswith("│")]
    return text, "".join(ln.split("│")[column + 1].strip() for ln in body)


def test_short_url_keeps_the_host_and_the_last_segment() -> None:
    assert short_url(LONG) == "http://127.0.0.11:40123/…/article-12345?ref=nav"
    assert short_url("http://h/a") == "http://h/a"


def test_trace_and_rules_tables_keep_each_url_readable_in_80_columns() -> None:
    """In 80 columns every URL was cut to a few characters ("http:/…", "drop-p…")."""
    now = datetime.now(UTC)
    _, trace = rendered(trace_table("news-1", [{
        "at": now.isoformat(), "url": LONG, "status": 200, "ms": 12.5, "bytes": 20480,
        "error": None, "worker": "w-0123abcd"}]), column=1)
    assert trace == short_url(LONG), trace
    text, rules = rendered(rules_table([RuleRow("news-1", "drop-param:ref@/c/", "active", 12,
                                          0, f"{LONG} = {LONG.split('?')[0]}", now, now, None)],
                                 []), column=4)
    assert "drop-param:ref@/c/" in text and "(active)" in text, text   # on lines of its own
    assert rules == short_url(LONG) + short_url(LONG.split("?")[0]), rules


def _words(text: str) -> set[str]:
    return set(text.replace("│", " ").split())


TRACE = [{"at": "2026-12-06T02:10:49.123+00:00", "url": LONG, "status": 500, "ms": 103.1,
          "bytes": 20480, "error": "http-500", "worker": "w-0123abcd"},
         {"at": "2026-12-06T02:10:48.001+00:00", "url": "http://127.0.0.11:40123/list/2",
          "status": 200, "ms": 12.5, "bytes": 3100, "error": None, "worker": "w-0123abcd"}]


@pytest.mark.parametrize("width", [80, 100])
def test_tables_never_break_a_word_inside_a_cell(width: int) -> None:
    """At 80 columns `trace` broke "statu/s", "http-5/00", "02:10:4/9", "103./1", and
    `url-rules` its rule names and source ids: every header and value now stays whole."""
    console = Console(width=width, record=True, force_terminal=False)
    console.print(trace_table("news-1", TRACE, width=width))
    text = console.export_text()
    assert max(len(ln) for ln in text.splitlines()) <= width, text
    assert {"time", "status", "ms", "error", "02:10:49", "500", "http-500", "103.1"} <= \
        _words(text), text
    now = datetime.now(UTC)
    console = Console(width=width, record=True, force_terminal=False)
    console.print(rules_table([RuleRow("products-12", "drop-param:sessionid@/p/", "active",
                                       12, 0, f"{LONG} = {LONG.split('?')[0]}", now, now,
                                       None)], [], width=width))
    text = console.export_text()
    assert max(len(ln) for ln in text.splitlines()) <= width, text
    assert {"products-12", "drop-param:sessionid@/p/", "(active)", "12", "source"} <= \
        _words(text), text


def test_a_wide_terminal_shows_each_url_whole_on_one_line() -> None:
    console = Console(width=200, record=True, force_terminal=False)
    console.print(trace_table("news-1", TRACE, width=200))
    text = console.export_text()
    assert any(LONG in ln for ln in text.splitlines()), text
