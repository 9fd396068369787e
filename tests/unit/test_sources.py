from datetime import timedelta
from pathlib import Path

import pytest

from stratacrawl.errors import SourcesError
from stratacrawl.sources import load_sources, parse_duration, parse_sources

pytestmark = pytest.mark.unit

GOOD = """
sources:
  - id: news-1
    seeds: ["http://127.0.0.2:8001/"]
    follow: ['/list/\\d+']
    items: ['/article/\\d+']
    rate: 5
    cadence: 30m
    extract: {kind: article}
    required: [title, text]
  - id: shop
    seeds: ["http://127.0.0.3:8002/"]
    extract:
      kind: rules
      fields:
        name: {css: "h1.name"}
        price: {css: ".price", type: price}
"""

BAD = """
sources:
  - id: a
    seeds: ["http://x/"]
    allow: ["(unclosed"]
  - id: a
    seeds: ["http://y/"]
    rate: -2
    colour: blue
"""


def test_good_file_parses(tmp_path: Path) -> None:
    f = tmp_path / "sources.yaml"
    f.write_text(GOOD)
    parsed = load_sources(f)
    assert parsed.ids == ["news-1", "shop"]
    news = parsed.get("news-1")
    assert news.cadence_td == timedelta(minutes=30)
    assert news.matches("items", "http://127.0.0.2:8001/article/12")
    assert not news.matches("items", "http://127.0.0.2:8001/list/1")
    assert parsed.get("shop").extract.kind == "rules"


def test_bad_file_reports_all_four_problems(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(BAD)
    with pytest.raises(SourcesError) as info:
        load_sources(f)
    problems = info.value.problems
    assert len(problems) == 4
    assert all(p.startswith(f"{f}: source 'a': ") for p in problems)
    joined = "\n".join(problems)
    assert "allow: bad regular expression '(unclosed'" in joined
    assert "id: duplicate id" in joined
    assert "rate: Input should be greater than 0" in joined
    assert "colour: unknown key" in joined


@pytest.mark.parametrize("entry, field", [
    ({"id": "Bad Id", "seeds": ["http://x/"]}, "id"),
    ({"id": "x", "seeds": []}, "seeds"),
    ({"id": "x", "seeds": ["http://x/"], "cadence": "often"}, "cadence"),
    ({"id": "x", "seeds": ["http://x/"], "robots": "maybe"}, "robots"),
    ({"id": "x", "seeds": ["http://x/"], "extract": {"kind": "magic"}}, "extract"),
])
def test_each_field_is_checked(entry: dict, field: str) -> None:
    with pytest.raises(SourcesError) as info:
        parse_sources({"sources": [entry]}, "s.yaml")
    assert any(f": {field}" in p for p in info.value.problems), info.value.problems


def test_unreadable_and_non_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(SourcesError, match="cannot read"):
        load_sources(tmp_path / "missing.yaml")
    f = tmp_path / "broken.yaml"
    f.write_text("sources: [unclosed")
    with pytest.raises(SourcesError, match="not valid YAML"):
        load_sources(f)


@pytest.mark.parametrize("text, seconds", [("30s", 30), ("15m", 900), ("6h", 21600),
                                           ("1d", 86400), ("1.5h", 5400), (90, 90)])
def test_parse_duration(text: str | int, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_parse_duration_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration("soon")


def test_seeds_must_be_absolute_http_urls() -> None:
    """Refused when the file is validated, each bad seed named with its reason (they
    were once accepted and dropped silently at crawl time)."""
    with pytest.raises(SourcesError) as caught:
        parse_sources({"sources": [{"id": "a", "seeds": [
            "javascript:alert(1)", "not a url", "ftp://x.example/", "https://ok.example/"]}]})
    (problem,) = caught.value.problems
    assert "source 'a': seeds:" in problem
    for reason in ("scheme-javascript", "relative", "scheme-ftp"):
        assert reason in problem
    assert "ok.example" not in problem


@pytest.mark.parametrize("document", [[], {"sources": []}])
def test_an_empty_sources_list_is_refused(document: object) -> None:
    with pytest.raises(SourcesError, match="the list is empty"):
        parse_sources(document)


def test_a_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("sources:\n  - id: café\n".encode("latin-1"))
    with pytest.raises(SourcesError, match=r"line 2: not UTF-8 text \(byte 0xe9"):
        load_sources(path)


def test_recrawl_bounds_enclose_the_cadence() -> None:
    def problems(entry: dict[str, object]) -> list[str]:
        with pytest.raises(SourcesError) as info:
            parse_sources({"sources": [{"id": "s", "seeds": ["http://x/"], **entry}]}, "s.yaml")
        return info.value.problems

    assert any("max_interval '1h' is shorter than cadence '2h'" in p for p in problems(
        {"cadence": "2h", "recrawl": {"max_interval": "1h"}}))
    assert any("expected a duration" in p for p in problems({"recrawl": {"max_interval": "soon"}}))
    assert any("daily_budget" in p for p in problems({"recrawl": {"daily_budget": -1}}))
    assert any("min_interval '3h' is longer than cadence '2h'" in p for p in problems(
        {"cadence": "2h", "recrawl": {"min_interval": "3h"}}))
    long = parse_sources({"sources": [{"id": "s", "seeds": ["http://x/"], "cadence": "3d"}]})
    assert long.get("s").max_interval_td == timedelta(days=3)
    assert long.get("s").min_interval_td == timedelta(days=1.5)


def test_a_seed_outside_allow_is_refused() -> None:
    """It was accepted by ``sources validate`` and fetched: ``allow`` bounds the seeds too."""
    with pytest.raises(SourcesError) as caught:
        parse_sources({"sources": [{"id": "news", "allow": [r"^https://news\.example/"],
                                    "seeds": ["https://news.example/", "https://other.example/x"]}]},
                      "s.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("s.yaml: source 'news': ")
    assert "'https://other.example/x' outside allow" in problem
    assert r"'^https://news\\.example/'" in problem and "'https://news.example/'" not in problem
    # Matched on the canonical form, as discovery matches links: a seed without its
    # trailing slash is in scope.
    parse_sources({"sources": [{"id": "n", "allow": [r"^https://news\.example/"],
                                "seeds": ["https://NEWS.example"]}]})


def test_long_user_input_is_clipped_in_messages() -> None:
    """A 10,000-character source id was echoed whole in a 10,113-character error line."""
    from stratacrawl.errors import SourcesError
    from stratacrawl.sources import parse_sources

    long_id = "a" * 10_000
    with pytest.raises(SourcesError) as caught:
        parse_sources({"sources": [{"id": long_id, "seeds": ["https://x.example/"]}]})
    assert caught.value.problems and all(len(p) < 300 for p in caught.value.problems)
    assert "…" in caught.value.problems[0]
    ok = parse_sources({"sources": [{"id": "news-1", "seeds": ["https://x.example/"]}]})
    with pytest.raises(KeyError) as missing:
        ok.get("b" * 10_000)
    assert len(str(missing.value)) < 300 and "it has news-1" in str(missing.value)


def test_url_patterns_run_in_linear_time_and_backtracking_ones_are_refused() -> None:
    """`allow`/`follow`/`items` run on RE2: `(a+)+$`, exponential in Python's engine on
    an URL built against it, answers at once; a pattern RE2 cannot run (backreference,
    lookaround) is refused naming source and field, with the way out."""
    import time

    source = parse_sources({"sources": [{"id": "s", "seeds": ["https://x.example/"],
                                         "items": ["(a+)+$"], "follow": [r"/list/\d+"]}]}
                           ).sources[0]
    hostile = "https://x.example/" + "a" * 5000 + "!"
    t0 = time.perf_counter()
    assert not source.matches("items", hostile)
    assert time.perf_counter() - t0 < 1.0    # Python's re: longer than the universe
    assert source.matches("items", "https://x.example/aaa")
    assert source.matches("follow", "https://x.example/list/3")
    for pattern, field in ((r"/(\d+)/\1", "items"), (r"/list/(?!0)", "follow"),
                           (r"(?<=/)x", "allow")):
        with pytest.raises(SourcesError) as caught:
            parse_sources({"sources": [{"id": "news-1", "seeds": ["https://x.example/"],
                                        field: [pattern]}]})
        (problem,) = caught.value.problems
        assert f"source 'news-1': {field}: " in problem, problem
        assert "cannot run in linear time" in problem and "rewrite the pattern" in problem


def test_sources_are_looked_up_by_id_in_the_file_and_in_a_copy_of_it() -> None:
    parsed = parse_sources({"sources": [{"id": f"s{i}", "seeds": [f"http://h{i}.test/"]}
                                        for i in range(50)]})
    assert parsed.get("s37").seeds == ["http://h37.test/"]
    assert parsed.has("s0") and not parsed.has("s50")
    with pytest.raises(KeyError, match="no source 's50'"):
        parsed.get("s50")
    # a copy with other sources answers for those (the index is not carried over)
    few = parsed.model_copy(update={"sources": parsed.sources[:2]})
    assert few.has("s1") and not few.has("s37")
    # the index is not part of what the file is
    again = parse_sources({"sources": [{"id": f"s{i}", "seeds": [f"http://h{i}.test/"]}
                                       for i in range(50)]})
    assert again == parsed and "_indexed" not in parsed.model_dump()
