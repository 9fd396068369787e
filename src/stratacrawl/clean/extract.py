"""Extractors: one fetched page → the fields of zero or more records. Pure (no I/O).

Contract (on the base): ``extract`` returns a list of :class:`Extracted`, one per record
the page holds (detail pages hold one); values are already coerced to their declared
types; a field that is absent or does not coerce is left out. Deciding whether what came
out is good enough (required fields) is the cleaner's job, not the extractor's.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.html
import parsel
import trafilatura
import trafilatura.metadata
from htmldate import find_date
from lxml import etree
from lxml.html import HtmlElement
from selectolax.lexbor import LexborHTMLParser
from trafilatura.htmlprocessing import prune_unwanted_nodes
from trafilatura.metadata import (
    examine_meta,
    extract_meta_json,
    extract_metainfo,
    extract_title,
    extract_url,
    normalize_authors,
)
from trafilatura.settings import Document, set_date_params
from trafilatura.utils import load_html
from trafilatura.xpaths import AUTHOR_XPATHS
from w3lib.encoding import html_to_unicode

from stratacrawl.clean import prunes, structured
from stratacrawl.clean.coerce import coerce
from stratacrawl.errors import FormatError
from stratacrawl.sources import ArticleExtract, FieldRule, JsonExtract, RulesExtract, Source

DETECT_BYTES = 64 * 1024   # what the detector reads of a body that declares no encoding
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF8 = ("utf-8", "utf8")   # as w3lib names it from a declaration, and from detection
_META_DATES = ("meta[property='article:published_time']", "meta[name='article:published_time']",
               "meta[itemprop='datePublished']", "meta[name='date']", "meta[name='pubdate']")
prunes.install()   # trafilatura's whole-page prunes without regex callbacks (see there)


@dataclass(frozen=True)
class Page:
    url: str                    # the URL the page was fetched from (after redirects)
    content_type: str | None
    body: bytes

    @cached_property
    def decoded(self) -> tuple[str, str]:
        """(text, encoding) of the body, decoded once (see :func:`decode_page`)."""
        return decode_page(self)


@dataclass(frozen=True)
class Extracted:
    fields: dict[str, Any]
    canonical_url: str          # rel=canonical (same host), the record's own URL, or the page URL


def _detect(body: bytes) -> str:
    """The encoding of a body that declares none: UTF-8 when it decodes as UTF-8, else
    what ``charset_normalizer`` finds likeliest, else Windows-1252 (what browsers assume)."""
    try:
        body.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(body[:DETECT_BYTES]).best()
    return best.encoding if best is not None else "cp1252"


def decode_page(page: Page) -> tuple[str, str]:
    """(text, encoding used) of the body, found as a browser finds it (the HTML standard's
    sniffing order): a byte-order mark, the Content-Type charset, a ``<meta charset>`` or
    ``http-equiv`` declaration in the first 1,024 bytes, then a detector. w3lib implements
    the order (and the WHATWG aliases: ``latin-1`` means windows-1252, as in browsers)."""
    encoding, text = html_to_unicode(page.content_type, page.body, auto_detect_fun=_detect)
    return text, encoding


def page_text(page: Page) -> str:
    """The body as text (see :func:`decode_page`)."""
    return page.decoded[0]


def parse_html(page: Page) -> LexborHTMLParser:
    """The page's DOM. lexbor reads UTF-8: a page decoded as UTF-8 without replacements
    (most pages) is handed over as its bytes, which lexbor parses ~15 % faster than the
    same text (the text would be encoded back to UTF-8 first); any other page as the
    decoded text."""
    text, encoding = page.decoded
    if encoding in _UTF8 and not page.body.startswith(_UTF8_BOM) and "\ufffd" not in text:
        return LexborHTMLParser(page.body)
    return LexborHTMLParser(text)


def _same_host_url(candidate: str | None, page_url: str) -> str | None:
    """``candidate`` resolved against the page, if it stays on the page's host (a hostile or
    syndicated canonical pointing elsewhere must not merge records across sites)."""
    if not candidate:
        return None
    candidate = candidate.strip()
    if candidate == page_url:  # the usual case: the page names itself
        return page_url
    resolved = urljoin(page_url, candidate)
    return resolved if urlsplit(resolved).hostname == urlsplit(page_url).hostname else None


class Extractor(ABC):
    """Fields of the records on one page; see the module docstring for the contract."""

    # What the extractor can read, by media type: markup (HTML, XHTML, XML) for selectors
    # and article extraction, text as a mislabelled page might be, and pages that declare
    # no type. A page of another type the fetcher let through (JSON for a source of CSS
    # rules, HTML for a ``json`` one) is refused before its body is decompressed.
    reads: tuple[str, ...] = ("html", "xml", "text/")

    @abstractmethod
    def extract(self, page: Page) -> list[Extracted]: ...

    def refusal(self, content_type: str | None) -> str | None:
        """Why a page of ``content_type`` cannot yield a record here (None: it may)."""
        media = (content_type or "").split(";", 1)[0].strip().lower()
        if not media or any(r in media for r in self.reads):
            return None
        return f"content type {media} is not one this source's extractor reads"


_LABEL_TAGS = "th, dt, label, td, b, strong, em, span, div, p, li, h2, h3, h4, h5, h6"
_LABEL_MAX = 60      # a label is short text


def label_key(text: str | None) -> str:
    """A label as compared: whitespace folded, case and a trailing colon ignored."""
    return " ".join((text or "").split()).rstrip(":").strip().casefold()


def label_value(tree: LexborHTMLParser, label: str, attr: str | None = None) -> str | None:
    """The value the first element whose whole text is ``label`` names (see
    :class:`~stratacrawl.sources.FieldRule`): the element after it, or the text after it
    in its parent (``<li><b>Price:</b> 12.50</li>``), or the element after its parent."""
    want = label_key(label)
    for node in tree.css(_LABEL_TAGS):
        own = node.text(deep=True, separator=" ", strip=True)
        if len(own) > _LABEL_MAX or label_key(own) != want:
            continue
        value = node.next
        while value is not None and value.tag == "-text" and not (value.text() or "").strip():
            value = value.next
        if value is not None and value.tag == "-text" and attr is None:
            return value.text().strip()       # the text after the label, in its parent
        if value is None and node.parent is not None:
            value = node.parent.next
            while value is not None and value.tag == "-text":
                value = value.next
        if value is None:
            continue
        got = (value.attributes.get(attr) if attr
               else value.text(deep=True, separator=" ", strip=True))
        if got:
            return got
    return None


class PageView:
    """One page as the field rules read it, each reading made once and only when a rule
    needs it: the lexbor DOM, an XPath selector (parsel), the schema.org JSON-LD and
    microdata objects (extruct, on lxml)."""

    def __init__(self, tree: LexborHTMLParser, html: str, base_url: str) -> None:
        self.tree = tree
        self.html = html
        self.base_url = base_url

    @cached_property
    def selector(self) -> parsel.Selector:
        return parsel.Selector(text=self.html)

    @cached_property
    def document(self) -> HtmlElement | None:
        return _lxml_document(self.html)

    @cached_property
    def jsonld(self) -> list[structured.Item]:
        return structured.jsonld_items(self.document) if self.document is not None else []

    @cached_property
    def microdata(self) -> list[structured.Item]:
        return (structured.microdata_items(self.document, self.base_url)
                if self.document is not None else [])

    def raw(self, rule: FieldRule) -> Any:
        """What ``rule`` finds on the page, before coercion (None: nothing)."""
        if rule.css is not None:
            node = self.tree.css_first(rule.css)
            if node is None:
                return None
            return (node.attributes.get(rule.attr) if rule.attr
                    else node.text(separator=" ", strip=True))
        if rule.xpath is not None:
            found = self.selector.xpath(rule.xpath)
            if not found:
                return None
            first = found[0]
            return (first.attrib.get(rule.attr) if rule.attr
                    else " ".join(t.strip() for t in first.xpath(".//text()").getall()
                                  if t.strip()) or first.get())
        if rule.jsonld is not None:
            return structured.pick(self.jsonld, rule.jsonld)
        if rule.microdata is not None:
            return structured.pick(self.microdata, rule.microdata)
        if rule.label is not None:
            return label_value(self.tree, rule.label, rule.attr)
        return None

    def value(self, rule: FieldRule) -> Any:
        """What ``rule`` finds, coerced to its type (None: nothing, or not of the type)."""
        return coerce(rule.type, self.raw(rule), self.base_url)


class _HtmlRules:
    """Field rules over one page (see :class:`PageView`)."""

    def __init__(self, rules: dict[str, FieldRule]) -> None:
        self.rules = rules

    def apply(self, tree: LexborHTMLParser, html: str, base_url: str) -> dict[str, Any]:
        view = PageView(tree, html, base_url)
        out: dict[str, Any] = {}
        for name, rule in self.rules.items():
            value = view.value(rule)
            if value is not None:
                out[name] = value
        return out


def _lxml_document(html: str) -> HtmlElement | None:
    """The page as lxml reads it (for extruct), or None for a page it cannot read."""
    try:
        return lxml.html.fromstring(html.encode("utf-8"),
                                    parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return None


def _canonical(tree: LexborHTMLParser, page_url: str) -> str:
    node = tree.css_first("link[rel=canonical]")
    href = node.attributes.get("href") if node is not None else None
    return _same_host_url(href, page_url) or page_url


class RulesExtractor(Extractor):
    """``kind: rules``: one record per page from CSS/XPath selectors."""

    def __init__(self, config: RulesExtract) -> None:
        self.rules = _HtmlRules(config.fields)

    def extract(self, page: Page) -> list[Extracted]:
        html = page_text(page)
        tree = parse_html(page)
        fields = self.rules.apply(tree, html, page.url)
        return [Extracted(fields, _canonical(tree, page.url))] if fields else []


class ArticleExtractor(Extractor):
    """``kind: article``: title, text, author, published and language through trafilatura
    (boilerplate, navigation, ads and comments removed). The publication time comes from the
    page's own markup (``<time datetime>``, ``article:published_time``) when it has one, as
    trafilatura keeps only the day. A field the source's own ``fields`` found on the page
    wins, and trafilatura does not look for it."""

    def __init__(self, config: ArticleExtract) -> None:
        self.extra = _HtmlRules(config.fields) if config.fields else None

    def extract(self, page: Page) -> list[Extracted]:
        html = page_text(page)
        lxml_tree = load_html(html)
        if lxml_tree is None:
            return []
        tree = parse_html(page)
        extra = self.extra.apply(tree, html, page.url) if self.extra is not None else {}
        published = _published(tree)
        meta, doc = _article(lxml_tree, page.url, title="title" not in extra,
                             author="author" not in extra,
                             day=published is None and "published" not in extra)
        if doc is None:
            return []
        body = getattr(doc, "text", None) or ""
        fields: dict[str, Any] = {
            "title": coerce("text", meta.title),
            # paragraphs stay apart (one blank line), spaces inside them are normalised
            "text": "\n\n".join(p for p in (coerce("text", line) for line in body.split("\n")) if p)
                    or None,
            "author": coerce("text", meta.author),
            "published": coerce("datetime", published or meta.date),
            "language": coerce("text", _lang(tree)),
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        fields.update(extra)
        return [Extracted(fields, _canonical(tree, page.url))] if fields else []


def _article(tree: HtmlElement, url: str, *, title: bool = True, author: bool = True,
             day: bool = True) -> tuple[Document, Any]:
    """The page's title, author and publication day (each only if asked for) and
    trafilatura's content extraction, from one parsed ``tree`` (changed: see below).

    The metadata are found as trafilatura's ``extract_metadata`` finds them — its steps
    for these fields — without what an article record does not keep: categories, tags,
    licence and site name (~25 % of trafilatura's time on a news page). The day search
    (another ~15 %) and the author heuristics are skipped when the page's markup or the
    source's own selectors already gave the field. The other readers leave the tree as it
    was (``bare_extraction`` works on a copy of it), so the author search, last, prunes
    the tree itself rather than a copy of its own."""
    meta = examine_meta(tree)
    if meta.author and " " not in meta.author:   # a handle, not a name (as trafilatura)
        meta.author = None
    with contextlib.suppress(Exception):         # trafilatura guards its JSON-LD reader too
        meta = extract_meta_json(tree, meta)
    if title and not meta.title:
        meta.title = extract_title(tree)
    if day:
        meta.date = find_date(tree, **{**set_date_params(True),
                                       "url": meta.url or extract_url(tree, url)})
    doc = trafilatura.bare_extraction(tree, url=url, with_metadata=False,
                                      include_comments=False, include_tables=False,
                                      include_images=False, include_links=False)
    if doc is not None and author and not meta.author:
        meta.author = _author(tree)
    meta.clean_and_trim()
    return meta, doc


def _author(tree: HtmlElement) -> str | None:
    """trafilatura's ``extract_author`` on ``tree`` itself, which it prunes, where
    trafilatura prunes a copy."""
    pruned = prune_unwanted_nodes(tree, trafilatura.metadata.AUTHOR_DISCARD_XPATHS)
    author = extract_metainfo(pruned, AUTHOR_XPATHS, len_limit=120)
    return normalize_authors(None, author) if author else author


def _published(tree: LexborHTMLParser) -> str | None:
    for css in _META_DATES:
        node = tree.css_first(css)
        if node is not None and node.attributes.get("content"):
            return node.attributes.get("content")
    node = tree.css_first("article time[datetime], time[datetime]")
    return node.attributes.get("datetime") if node is not None else None


def _lang(tree: LexborHTMLParser) -> str | None:
    node = tree.css_first("html[lang]")
    return node.attributes.get("lang") if node is not None else None


def _path(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part)
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


class JsonExtractor(Extractor):
    """``kind: json``: the page is one object, or ``items`` points at a list of them."""

    reads = ("json", "javascript", "text/")

    def __init__(self, config: JsonExtract) -> None:
        self.config = config

    def extract(self, page: Page) -> list[Extracted]:
        try:
            doc = json.loads(page_text(page))
        except ValueError as e:
            raise FormatError(f"not JSON: {e}", url=page.url) from None
        objects = _path(doc, self.config.items) if self.config.items else doc
        if isinstance(objects, dict):
            objects = [objects]
        if not isinstance(objects, list):
            return []
        out = []
        for obj in objects:
            if not isinstance(obj, dict):
                continue
            if self.config.fields:
                fields = {name: coerce(f.type, _path(obj, f.path), page.url)
                          for name, f in self.config.fields.items()}
            else:
                fields = {k: v for k, v in obj.items()
                          if isinstance(v, str | int | float | bool) and v is not None}
            fields = {k: v for k, v in fields.items() if v is not None}
            if fields:
                own = obj.get("url") if isinstance(obj.get("url"), str) else None
                out.append(Extracted(fields, _same_host_url(own, page.url) or page.url))
        return out


def extractor_for(source: Source) -> Extractor:
    config = source.extract
    if isinstance(config, RulesExtract):
        return RulesExtractor(config)
    if isinstance(config, JsonExtract):
        return JsonExtractor(config)
    return ArticleExtractor(config)
