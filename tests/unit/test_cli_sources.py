"""Which sources file a command reads when it is given none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratacrawl.cli.common import find_sources, sources_path

pytestmark = pytest.mark.unit


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    here, state = tmp_path / "here", tmp_path / "state"
    here.mkdir()
    state.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("STRATACRAWL_STATE_DIR", str(state))
    monkeypatch.delenv("STRATACRAWL_SOURCES", raising=False)
    return here, state


def test_the_platforms_sources_file_is_read_when_none_is_given(
        places: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """After `up --demo` the CLI could not find the platform's sources ("sources.yaml:
    cannot read"): `up` records its file and commands read it, saying so."""
    here, state = places
    platform = state / "demo-sources.yaml"
    platform.write_text("sources: []\n")
    (state / "platform.json").write_text(json.dumps({"sources": str(platform)}))
    assert find_sources(None) == platform
    assert "the platform's" in capsys.readouterr().err
    (here / "sources.yaml").write_text("sources: []\n")   # one here comes first
    assert find_sources(None) == Path("sources.yaml")
    assert find_sources(Path("/given.yaml")) == Path("/given.yaml")


def test_no_sources_file_names_where_it_looked(places: tuple[Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    here, state = places
    assert find_sources(None) is None
    with pytest.raises(SystemExit) as exit_:
        sources_path(None)
    assert exit_.value.code == 2
    message = " ".join(capsys.readouterr().err.split())
    assert f"no sources.yaml in {here}" in message and str(state) in message
