"""The cleaner's stand-ins for trafilatura's whole-page prunes select exactly what
trafilatura's XPath expressions select, and are in trafilatura's place."""

from __future__ import annotations

import pytest
import trafilatura.xpaths
from trafilatura.utils import load_html

from stratacrawl.clean import prunes
from stratacrawl.clean.extract import Page, extractor_for
from stratacrawl.sim import build_specs
from stratacrawl.sim.render import item_html
from stratacrawl.sources import parse_sources

pytestmark = pytest.mark.unit

_SHIPPED = {prunes._text(x.path): x for name in ("RAW_TREE_PRUNE_XPATH",
                                                  "REMOVE_COMMENTS_AND_LISTS_XPATH",
                                                  "AUTHOR_DISCARD_XPATHS")
            for x in getattr(trafilatura.xpaths, name)}

# every branch of the four expressions, matched and missed, nested and not
_EDGES = """<html><body><article><h1>Title</h1><p>Text of the article.</p>
<div id="comments"><div class="comment">a</div><ol class="commentlist"><li>x</li></ol>
  <ul id="comol"><li>y</li></ul><ul class="x"><li>z</li></ul><ol id="dsq-comments"></ol></div>
<section id="commentary">kept</section><section id="Comment-3">gone</section>
<div id="disqus_thread"></div><ul id="dsq-comments"></ul><details class="post-comments"></details>
<div class="article-comments"><DIV CLASS="Comments">upper-case tags</DIV></div>
<div class="infinite-scroll"><h1>another</h1></div><div class="infinitescroll"><p>x</p></div>
<aside id="mvp-post-add-box"><h1>appended</h1></aside><section class="mvp-post-add-wrap"></section>
<div class="a elementor-share-buttons b"></div><aside class="elementor-share-buttons--x"></aside>
<span class="title">t</span><span class="title x">t2</span><a id="comments">c</a>
<span class="date ">d</span><span class="date">d2</span><div class="quote-box">q</div>
<span data-component="MainFigure">f</span><section class="print-only">p</section>
<div id="comment-list">l</div><div id="ProductReviews">r</div><span class="meta-date">m</span>
<div class="is-hidden sidebar">s</div><span class="byline">By Ann Example</span>
<time datetime="2026-12-01">1 Dec</time><figure>fig</figure></article></body></html>"""


def _pages() -> list[tuple[str, str]]:
    pages = [("edges", _EDGES)]
    for spec in build_specs(3, 7):
        if spec.kind in ("news", "products"):
            pages += [(f"{spec.id}/{k}", item_html(spec, k, False).decode()) for k in range(3)]
    return pages


def test_every_prune_trafilatura_runs_on_the_whole_page_is_replaced() -> None:
    """A trafilatura release that changes one of these expressions fails here: its own
    expression then runs (slower, still right) until a selection is written for it."""
    assert prunes.install() == len(prunes.SELECTIONS) == 4
    assert {prunes._text(s.path) for s in prunes.SELECTIONS} <= set(_SHIPPED)


@pytest.mark.parametrize("selection", prunes.SELECTIONS, ids=lambda s: "-".join(s.tags))
def test_a_selection_selects_what_trafilaturas_expression_selects(
        selection: prunes.Selection) -> None:
    shipped = _SHIPPED[prunes._text(selection.path)]
    selected = 0
    for name, html in _pages():
        tree = load_html(html)
        where = tree.getroottree().getpath
        want = [where(e) for e in shipped(tree)]
        assert [where(e) for e in selection(tree)] == want, name
        selected += len(want)
    assert selected   # the pages exercise it


def test_articles_are_what_trafilatura_as_shipped_makes_of_them() -> None:
    extractor = extractor_for(parse_sources({"sources": [{
        "id": "s", "seeds": ["http://h/"], "extract": {"kind": "article"}}]}).sources[0])
    for name, html in _pages():
        page = (f"http://h/{name}", "text/html", html.encode())
        ours = [r.fields for r in extractor.extract(Page(*page))]
        with prunes.as_shipped():
            shipped = [r.fields for r in extractor.extract(Page(*page))]
        assert ours == shipped, name
