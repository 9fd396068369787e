"""URL equivalence rules: what a pair of equal pages teaches, what a counterexample
revokes, and that applying rules is idempotent and never merges different content."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratacrawl.sources import parse_sources
from stratacrawl.urls import canonicalize
from stratacrawl.urls.equivalence import MIN_SUPPORT, Rule, apply, explain, mine, state_of
from tests.support.examples import examples

pytestmark = pytest.mark.unit
H = "http://news.test"


def pages(pairs: dict[str, str]) -> dict[str, tuple[str, str]]:
    from urllib.parse import urlsplit

    return {canonicalize(u): (c, urlsplit(canonicalize(u)).path) for u, c in pairs.items()}


@pytest.mark.parametrize("a, b, rules", [
    (f"{H}/article/6?ref=3", f"{H}/article/6", {"drop-param:ref@/article/"}),
    (f"{H}/article/6/index.html", f"{H}/article/6", {"trailing-slash@/article/"}),
    (f"{H}/Article/6", f"{H}/article/6", {"path-case@/article/"}),
    (f"{H}/p?id=1&ref=a", f"{H}/p?id=1&ref=b", {"drop-param:ref"}),
    (f"{H}/shop/view?item=5&c=1", f"{H}/shop/view?c=1&id=5", {"rename-param:item=id@/shop/"}),
    (f"{H}/shop/view?item=5", f"{H}/shop/view?id=6", {"drop-param:item@/shop/",
                                                      "drop-param:id@/shop/"}),
    (f"{H}/article/6?ref=3", f"{H}/article/7", None),             # another page
    (f"{H}/article/6", "http://other.test/article/6", None),        # another host
])
def test_a_pair_of_equal_pages_is_explained_by_its_rules(a: str, b: str,
                                                         rules: set[str] | None) -> None:
    got = explain(canonicalize(a), canonicalize(b))
    assert ({r.text() for r in got} if got else None) == rules


def test_rules_need_support_and_fall_to_one_counterexample() -> None:
    equal = {f"{H}/article/{k}?ref={k % 5}": f"c{k}" for k in range(MIN_SUPPORT)}
    equal |= {f"{H}/article/{k}": f"c{k}" for k in range(MIN_SUPPORT)}
    (rule, stats), = mine(pages(equal)).items()
    assert rule.text() == "drop-param:ref@/article/" and stats.support == MIN_SUPPORT
    assert state_of(stats) == "active"
    fewer = mine(pages(dict(list(equal.items())[1:])))
    assert state_of(fewer[rule]) == "candidate"
    # one page where ref matters: the rule would merge different content
    against = equal | {f"{H}/article/99?ref=1": "one", f"{H}/article/99": "other"}
    assert state_of(mine(pages(against))[rule]) == "revoked"


def test_a_parameter_that_matters_on_some_paths_only_is_learned_where_it_does_not() -> None:
    site = {}
    for k in range(10):
        site[f"{H}/product/{k}?page=2"] = site[f"{H}/product/{k}"] = f"p{k}"
        site[f"{H}/list/{k}?page=1"] = f"l{k}a"   # on lists, page is the page
        site[f"{H}/list/{k}?page=2"] = f"l{k}b"
    site[f"{H}/list/0"] = "l0a"                   # and page=1 is the default: a pair
    learned = {r.text(): state_of(s) for r, s in mine(pages(site)).items()}
    assert learned["drop-param:page@/product/"] == "active"
    assert learned["drop-param:page@/list/"] == "revoked"
    merged = apply([Rule.parse("drop-param:page@/product/")], canonicalize(f"{H}/list/3?page=2"))
    assert merged == canonicalize(f"{H}/list/3?page=2")   # outside its scope: untouched


def test_rel_canonical_links_are_evidence_and_excuse_bytes_that_differ() -> None:
    """Each variant's page has its own timestamp (no two fingerprints are equal), but names
    the canonical URL: that is support, and the differing bytes are no counterexample."""
    site = {f"{H}/article/{k}?ref={k}": f"v{k}" for k in range(MIN_SUPPORT)}
    site |= {f"{H}/article/{k}": f"c{k}" for k in range(MIN_SUPPORT)}
    declared = {canonicalize(f"{H}/article/{k}?ref={k}"): canonicalize(f"{H}/article/{k}")
                for k in range(MIN_SUPPORT)}
    assert mine(pages(site)) == {}    # bytes alone: nothing to learn
    (rule, stats), = mine(pages(site), declared=declared).items()
    assert (rule.text(), stats.support, state_of(stats)) == (
        "drop-param:ref@/article/", MIN_SUPPORT, "active")
    assert "→" in (stats.example or "")
    # a variant that names itself while its content differs: the parameter matters there
    site[f"{H}/article/9?ref=1"], site[f"{H}/article/9"] = "one", "other"
    assert state_of(mine(pages(site), declared=declared)[rule]) == "revoked"


def test_apply_rewrites_only_what_its_rules_cover() -> None:
    rules = [Rule.parse("drop-param:ref"), Rule.parse("trailing-slash@/article/")]
    assert apply(rules, f"{H}/article/6/?a=1&ref=2") == f"{H}/article/6?a=1"
    assert apply(rules, f"{H}/shop/6/?ref=2") == f"{H}/shop/6/"
    assert apply(rules, f"{H}/") == f"{H}/"
    alias = [Rule.parse("rename-param:item=id")]
    assert apply(alias, f"{H}/v?item=5&z=1") == f"{H}/v?id=5&z=1"
    assert apply(alias, f"{H}/v?id=4&item=5") == f"{H}/v?id=4&item=5"   # both: not an alias


@pytest.mark.parametrize("text, error", [
    ("drop-param", "takes a parameter name"),
    ("trailing-slash:x", "takes a parameter name"),
    ("rename:x", "unknown URL rule"),
    ("path-case@/a/b/", "one path segment"),
    ("rename-param:item", "renames ALIAS to NAME"),
])
def test_bad_rules_in_the_sources_file_are_named(text: str, error: str) -> None:
    doc = {"sources": [{"id": "s", "seeds": [f"{H}/"], "url_rules": {"pin": [text]}}]}
    with pytest.raises(Exception, match=error):
        parse_sources(doc)


RULES = st.lists(st.one_of(
    st.sampled_from(["trailing-slash", "path-case", "trailing-slash@/a/", "path-case@/b/"]),
    st.sampled_from(["ref", "id", "page", "x"]).map(lambda p: f"drop-param:{p}"),
    st.sampled_from(["item=id", "x=page", "ref=x"]).map(lambda p: f"rename-param:{p}")),
    max_size=4).map(lambda ts: [Rule.parse(t) for t in ts])
URLS = st.builds(lambda seg, rest, q: f"{H}/{seg}/{rest}{q}",
                 st.sampled_from(["a", "b", "A", "c"]),
                 st.sampled_from(["", "x", "X/", "y/z/", "%2Fq"]),
                 st.sampled_from(["", "?ref=1", "?id=2&ref=3", "?page=1&x=", "?x=1&x=2",
                                  "?item=5", "?id=1&item=2", "?b=1&x=3"]))


@settings(max_examples=examples(400), deadline=None)
@given(RULES, URLS)
def test_apply_is_idempotent(rules: list[Rule], url: str) -> None:
    once = apply(rules, canonicalize(url))
    assert apply(rules, once) == once
    assert canonicalize(once) == apply(rules, canonicalize(once))


def test_siblings_are_the_plainer_forms_only() -> None:
    from stratacrawl.urls.equivalence import siblings

    url = "http://a.example/Article/6/?ref=3&utm_source=x"
    forms = siblings(url)
    assert "http://a.example/Article/6/" in forms            # no query
    assert "http://a.example/Article/6?ref=3&utm_source=x" in forms   # no trailing slash
    assert "http://a.example/Article/6/?utm_source=x" in forms        # one parameter less
    assert "http://a.example/article/6" in forms              # all of it
    assert url not in forms
    # a plainer form never has a sibling that is the URL it came from
    assert all(url not in siblings(f) for f in forms)
    assert siblings("http://a.example/article/6") == []
    assert siblings("http://a.example/Article/6") == ["http://a.example/article/6"]
    assert siblings("http://10.0.0.1/6/") == ["http://10.0.0.1/6"]
    assert explain(url, "http://a.example/article/6") is not None
