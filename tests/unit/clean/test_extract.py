"""Extractors and coercion: pure functions over page bytes."""

from __future__ import annotations

import json

import pytest

from stratacrawl.clean.coerce import coerce
from stratacrawl.clean.extract import Page, decode_page, extractor_for
from stratacrawl.errors import FormatError, SourcesError
from stratacrawl.sim import build_specs
from stratacrawl.sim.content import get_item
from stratacrawl.sim.render import item_html, price_json
from stratacrawl.sources import Source, parse_sources

pytestmark = pytest.mark.unit


def source(**extract: object) -> Source:
    return parse_sources({"sources": [{"id": "s", "seeds": ["http://h/"], "extract": extract}]}
                         ).sources[0]


@pytest.mark.parametrize(("kind", "raw", "want"), [
    ("price", "USD 1,234.50", 1234.5), ("price", "1.234,50 €", 1234.5), ("price", "call us", None),
    ("price", "Free", 0.0),
    ("int", "12 in stock", 12), ("int", "1.5", None), ("float", " 3.25 ", 3.25),
    ("datetime", "2026-11-29T11:01:06Z", "2026-11-29T11:01:06Z"),
    ("datetime", "2026-11-29T12:01:06+01:00", "2026-11-29T11:01:06Z"),
    ("date", "29 Nov 2026", "2026-11-29"), ("datetime", "not a date", None),
    ("text", "  a \n\t b ", "a b"), ("text", "   ", None), ("url", "../x", "http://h/x"),
])
def test_coercion(kind: str, raw: str, want: object) -> None:
    assert coerce(kind, raw, "http://h/a/b") == want


def test_rules_css_and_xpath_with_types_and_canonical() -> None:
    src = source(kind="rules", fields={
        "name": {"css": "h1.n"}, "price": {"xpath": "//span[@class='p']", "type": "price"},
        "stock": {"css": "div.s", "attr": "data-n", "type": "int"}})
    html = (b"<html><head><link rel=canonical href='/item/1'></head><body><h1 class=n> Lamp\n"
            b"  Pro </h1><span class='p'>EUR <b>12.50</b></span><div class=s data-n='7'></div>")
    (rec,) = extractor_for(src).extract(Page("http://h/item/1?ref=3", "text/html", html))
    assert rec.fields == {"name": "Lamp Pro", "price": 12.5, "stock": 7}
    assert rec.canonical_url == "http://h/item/1"


def test_canonical_to_another_host_is_ignored() -> None:
    src = source(kind="rules", fields={"name": {"css": "h1"}})
    html = b"<link rel=canonical href='http://evil.example/x'><h1>A</h1>"
    (rec,) = extractor_for(src).extract(Page("http://h/p", "text/html", html))
    assert rec.canonical_url == "http://h/p"


def test_nothing_matched_yields_no_record() -> None:
    src = source(kind="rules", fields={"name": {"css": "h1.n"}})
    assert extractor_for(src).extract(Page("http://h/p", "text/html", b"<h2>x</h2>")) == []


def test_charset_from_content_type() -> None:
    src = source(kind="rules", fields={"name": {"css": "h1"}})
    body = "<h1>Café</h1>".encode("latin-1")
    (rec,) = extractor_for(src).extract(Page("http://h/p", "text/html; charset=ISO-8859-1", body))
    assert rec.fields["name"] == "Café"


RU_TITLE = "Привет мир"
RU_TEXT = ("Это длинный текст статьи на русском языке, чтобы извлечь его как статью. " * 6).strip()  # noqa: RUF001


@pytest.mark.parametrize(("content_type", "head"), [
    ("text/html", '<meta charset="windows-1251">'),                      # <meta charset> only
    ("text/html", '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'),
    ("text/html; charset=windows-1251", ""),                             # the header
    ("text/html", ""),                                                   # nothing: the detector
])
def test_encoding_is_found_as_a_browser_finds_it(content_type: str, head: str) -> None:
    """A windows-1251 page that declares its encoding only in ``<meta charset>`` was read
    as UTF-8/Latin-1: its title came out as mojibake in the records."""
    html = (f"<html><head>{head}<title>{RU_TITLE}</title></head><body><article>"
            f"<h1>{RU_TITLE}</h1><p>{RU_TEXT}</p></article></body></html>")
    page = Page("http://h/a/1", content_type, html.encode("cp1251"))
    assert decode_page(page)[1] == "cp1251"
    (rec,) = extractor_for(source(kind="rules", fields={"name": {"css": "h1"}})).extract(page)
    assert rec.fields["name"] == RU_TITLE
    (article,) = extractor_for(source(kind="article")).extract(page)
    assert article.fields["title"] == RU_TITLE and "русском" in article.fields["text"]


def test_a_byte_order_mark_wins_over_a_wrong_declaration() -> None:
    body = "\ufeff<meta charset='iso-8859-1'><h1>Grüße</h1>".encode("utf-8")
    assert decode_page(Page("http://h/", "text/html; charset=iso-8859-1", body)) == (
        "<meta charset='iso-8859-1'><h1>Grüße</h1>", "utf-8")


def test_article_matches_the_simulator_truth() -> None:
    spec = next(s for s in build_specs(3, 4) if s.kind == "news")
    truth = get_item(spec, 5).fields
    (rec,) = extractor_for(source(kind="article")).extract(
        Page(spec.base_url + "/article/5", "text/html", item_html(spec, 5, False)))
    assert rec.fields["title"] == truth["title"] and rec.fields["author"] == truth["author"]
    assert rec.fields["text"].split() == truth["text"].split()
    assert "reader" not in rec.fields["text"]  # comments are not the article
    assert rec.fields["published"][:19] == truth["published"][:19]
    assert rec.fields["language"] == "en"


_BODY = ("<main><article><h1>Harbour council votes on the new lantern budget</h1>"
         + "".join(f"<p>Paragraph {i}: the council met on the harbour front to argue about the "
                   "budget for lanterns, the railway and the winter market, at length.</p>"
                   for i in range(8)) + "</article></main>")
_ARTICLE_PAGES = {
    "json-ld, no markup time": (
        "https://news.example/story/1",
        "<html><head><title>Harbour | News</title><script type='application/ld+json'>"
        '{"@context":"https://schema.org","@type":"NewsArticle","headline":"Harbour council votes",'
        '"author":{"@type":"Person","name":"Mara Quist"},"datePublished":"2024-03-05"}'
        f"</script></head><body>{_BODY}</body></html>"),
    "a handle as meta author, byline in the page, day in the URL": (
        "https://news.example/2023/11/07/harbour-lanterns",
        "<html><head><meta property='og:title' content='Lanterns for the harbour'>"
        "<meta name='author' content='mquist'></head><body>"
        f"<div class='byline'>By <span class='author'>Mara Quist</span></div>{_BODY}"
        "</body></html>"),
    "nothing but the text": ("https://news.example/x", f"<html><body>{_BODY}</body></html>"),
}


@pytest.mark.parametrize("name", _ARTICLE_PAGES)
def test_article_metadata_is_trafilaturas(name: str) -> None:
    """Title, author and day are trafilatura's full metadata extraction's, though the
    extractor runs only the steps for the fields a record keeps."""
    import trafilatura
    url, html = _ARTICLE_PAGES[name]
    full = trafilatura.bare_extraction(html, url=url, with_metadata=True, include_comments=False,
                                       include_tables=False, include_images=False,
                                       include_links=False)
    (rec,) = extractor_for(source(kind="article")).extract(Page(url, "text/html", html.encode()))
    assert full.title and (full.date or name == "nothing but the text")
    assert rec.fields.get("title") == coerce("text", full.title)
    assert rec.fields.get("author") == coerce("text", full.author)
    assert rec.fields.get("published", "")[:10] == (full.date or "")
    assert rec.fields["text"].split() == full.text.split()


def test_article_fields_the_source_selects_are_not_searched_by_trafilatura(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from stratacrawl.clean import extract
    spec = next(s for s in build_specs(3, 4) if s.kind == "news")
    truth = get_item(spec, 5).fields
    page = Page(spec.base_url + "/article/5", "text/html", item_html(spec, 5, False))
    searched = []
    original = extract._author
    monkeypatch.setattr(extract, "_author",
                        lambda tree: searched.append(1) or original(tree))
    by_selector = extractor_for(source(kind="article", fields={
        "author": {"css": "span.author"}}))
    (rec,) = by_selector.extract(page)
    assert rec.fields["author"] == truth["author"] and searched == []
    # where the selector finds nothing, trafilatura's author stands
    (rec,) = extractor_for(source(kind="article", fields={
        "author": {"css": "span.no-such-class"}})).extract(page)
    assert rec.fields["author"] == truth["author"] and searched == [1]


def test_json_fields_by_path_and_redesign_misses_them() -> None:
    spec = next(s for s in build_specs(3, 4) if s.kind == "prices")
    src = source(kind="json", fields={"symbol": {"path": "symbol"},
                                      "price": {"path": "price", "type": "price"}})
    page = Page(spec.base_url + "/api/prices/2", "application/json", price_json(spec, 2))
    (rec,) = extractor_for(src).extract(page)
    assert rec.fields == {k: get_item(spec, 2).fields[k] for k in ("symbol", "price")}
    spec.behaviour.redesign = True
    assert extractor_for(src).extract(Page(page.url, page.content_type, price_json(spec, 2))) == []


def test_json_items_list_and_all_scalars() -> None:
    src = source(kind="json", items="data.rows")
    body = json.dumps({"data": {"rows": [{"a": 1, "url": "/r/1", "nested": {"x": 1}}, {"a": 2},
                                         "junk"]}}).encode()
    recs = extractor_for(src).extract(Page("http://h/api", "application/json", body))
    assert [r.fields for r in recs] == [{"a": 1, "url": "/r/1"}, {"a": 2}]
    assert recs[0].canonical_url == "http://h/r/1" and recs[1].canonical_url == "http://h/api"


def test_not_json_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="not JSON"):
        extractor_for(source(kind="json")).extract(Page("http://h/", "application/json", b"<html>"))


def test_required_fields_must_be_extracted() -> None:
    with pytest.raises(SourcesError, match=r"required field\(s\) \['price'\] are not extracted"):
        parse_sources({"sources": [{"id": "s", "seeds": ["http://h/"], "required": ["price"],
                                    "extract": {"kind": "rules", "fields": {"n": {"css": "h1"}}}}]})


@pytest.mark.parametrize(("extract", "content_type", "refused"), [
    ({"kind": "rules", "fields": {"n": {"css": "h1"}}}, "text/html; charset=utf-8", False),
    ({"kind": "rules", "fields": {"n": {"css": "h1"}}}, "application/xhtml+xml", False),
    ({"kind": "rules", "fields": {"n": {"css": "h1"}}}, None, False),
    ({"kind": "rules", "fields": {"n": {"css": "h1"}}}, "application/json", True),
    ({"kind": "article"}, "application/ld+json", True),
    ({"kind": "article"}, "text/plain", False),
    ({"kind": "json"}, "application/json", False),
    ({"kind": "json"}, "text/javascript", False),
    ({"kind": "json"}, "text/html", False),          # a mislabelled API answer is tried
    ({"kind": "json"}, "application/rss+xml", True),
])
def test_a_page_of_a_type_the_extractor_cannot_read_is_refused_by_its_type(
        extract: dict[str, object], content_type: str | None, refused: bool) -> None:
    why = extractor_for(source(**extract)).refusal(content_type)
    assert (why is not None) == refused
    if refused:
        assert (content_type or "").split(";")[0] in why
