"""A page's declared canonical URL, read from its head with regular expressions, is the one
an HTML parser (lexbor) finds, whatever the markup around it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from stratacrawl.frontier.links import canonical_link
from tests.support.examples import examples

pytestmark = pytest.mark.unit


def parsed_canonical(head: str) -> str | None:
    """What lexbor reads: the first <link> of the head whose rel holds canonical."""
    tree = LexborHTMLParser(head)
    for node in tree.css("head link[rel]"):
        if "canonical" in (node.attributes.get("rel") or "").lower().split():
            return (node.attributes.get("href") or "").strip() or None
    return None


HREFS = st.sampled_from(["http://a.test/x", "/rel/path?a=1&amp;b=2", " http://a.test/sp ",
                         "http://a.test/é", "", "http://a.test/q?x=&lt;y"])
RELS = st.sampled_from(["canonical", "Canonical", "CANONICAL", "alternate canonical",
                        "stylesheet", "canonical-ish", "icon"])


@st.composite
def link_tag(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(["link", "LINK", "Link"]))
    quote = draw(st.sampled_from(['"', "'", ""]))
    rel, href = draw(RELS), draw(HREFS)
    if not quote and (" " in rel or " " in href or not href):
        quote = '"'
    attrs = [f"rel={quote}{rel}{quote}", f"href={quote}{href}{quote}"]
    if draw(st.booleans()):
        attrs.reverse()
    if draw(st.booleans()):
        attrs.insert(1, draw(st.sampled_from(['type="text/html"', "data-x", 'hreflang=en'])))
    if draw(st.booleans()):
        attrs.append('rel="stylesheet"')   # a repeated attribute: the first counts
    sep = draw(st.sampled_from([" ", "  ", "\n", "\t"]))
    close = draw(st.sampled_from([">", "/>", " />"]))
    return f"<{name}{sep}{sep.join(attrs)}{close}"


@st.composite
def head_part(draw: st.DrawFn) -> str:
    inner = draw(link_tag())
    return draw(st.sampled_from([
        inner,
        f"<!-- {inner} -->",
        f"<script>var s = '{inner}';</script>",
        f"<SCRIPT type='text/javascript'>document.write(\"{inner}\")</SCRIPT>",
        f"<style>/* {inner} */ body {{color: red}}</style>",
        f"<title>{inner.replace('<', '&lt;')} title</title>",
        "<meta charset='utf-8'>",
        "<meta name='description' content='canonical things'>",
        "<script src='/app.js' defer></script>",
    ]))


@settings(max_examples=examples(1500), deadline=None)
@given(st.lists(head_part(), max_size=6), st.sampled_from(["</head>", "</HEAD >", ""]))
def test_the_regex_reading_agrees_with_the_parser(parts: list[str], end: str) -> None:
    head = "<!doctype html><html lang='en'><head>" + "".join(parts) + end
    page = head + "<body><p>text <link rel='canonical' href='http://a.test/body'></p></body>"
    expected = parsed_canonical(page if end else head)
    assert canonical_link(page.encode() if end else head.encode()) == expected


def test_a_head_without_a_canonical_link() -> None:
    assert canonical_link(b"<html><head><title>t</title></head><body></body></html>") is None
    assert canonical_link("<head><link rel=canonical href=http://a.test/u></head>") == (
        "http://a.test/u")
