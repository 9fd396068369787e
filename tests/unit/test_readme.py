"""The README's tables say what the program has: every command Typer registers is in the
Commands table, and every setting (``Settings``' fields and the variables read elsewhere)
is in the Configuration table — and nothing there that the program does not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stratacrawl.cli.app import app
from stratacrawl.settings import OTHER_VARIABLES, PREFIX, Settings

pytestmark = pytest.mark.unit

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def _documented_variables() -> set[str]:
    """Names in the first cell of the Configuration table's rows: `STRATACRAWL_A` and
    the short forms after it (`/ `_B``) that share its prefix."""
    names = set()
    for line in _section("Configuration").splitlines():
        cells = line.strip().split("|")
        if len(cells) < 3 or "STRATACRAWL_" not in cells[1]:
            continue
        for name in re.findall(r"`(STRATACRAWL_[A-Z0-9_]+|_[A-Z0-9_]+)`", cells[1]):
            names.add(name.removeprefix(PREFIX).lstrip("_"))
    return names


def _registered_commands() -> set[str]:
    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    return names | {g.name for g in app.registered_groups if g.name}


def test_every_setting_is_in_the_configuration_table_and_only_those() -> None:
    settings = {name.upper() for name in Settings.model_fields}
    documented = _documented_variables()
    assert settings - documented == set(), "settings missing from the README's table"
    assert documented - settings - OTHER_VARIABLES == set(), "README names unknown settings"


def test_every_command_is_in_the_commands_table_and_only_those() -> None:
    table: set[str] = set()
    for line in _section("Commands").splitlines():
        if line.startswith("| `stratacrawl "):
            first = line.split(" | ")[0]   # `stratacrawl up …` / `down`: both named
            table |= set(re.findall(r"`(?:stratacrawl )?([a-z][a-z-]*)", first))
    registered = _registered_commands()
    assert registered - table == set(), "commands missing from the README's table"
    assert table - registered == set(), "README names commands the CLI does not have"
