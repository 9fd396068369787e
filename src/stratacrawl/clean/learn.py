"""Learning a source's field rules from examples: pages, and the values their records
should hold (typed as records hold them: a price as a number, a date as ISO 8601).

For each field, every example page offers **candidates** — each place its value is found:
a path into the page's schema.org JSON-LD or microdata, the label that names it in a
label/value layout, and CSS selectors for the elements holding it (as text, or in an
attribute: ``content=``, ``data-*``, ``href`` …), built from the element's stable
attributes, its classes, an ancestor that has either, or its position. A value matches
when the rule's text, coerced to the field's type by the cleaner's own coercion, equals
it ("USD 1,299.00" and "1.299,00 €" both are 1299.0; "March 5, 2026" is 2026-03-05).

A candidate **fits** when it gives the right value on every example (through the
extractor the cleaner runs, :class:`~stratacrawl.clean.extract.PageView`): a rule that
only matched one occurrence — the price of a related product, a breadcrumb holding the
name — fails on the other pages. Among the rules that fit, the most stable wins:
structured data (JSON-LD, then microdata), then a label, then stable attributes
(``itemprop``, ``data-*``, an id that is not generated), then classes, then names a build
tool generated (``css-1x2y3z``: the next deploy changes them), then positions; the
shorter first.

Each field's rule is also checked on **held-back** examples: each example in turn is left
out, a rule is chosen from the others, and applied to it; precision is right values among
the values it gave, recall right values among the examples. A field no candidate fits is
refused, naming the examples the closest candidate disagrees with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lxml.html import HtmlElement
from selectolax.lexbor import LexborHTMLParser

from stratacrawl.clean import structured
from stratacrawl.clean.coerce import coerce
from stratacrawl.clean.extract import Page, PageView, label_key, page_text, parse_html
from stratacrawl.sources import FieldRule

# Stability ranks, most stable first
JSONLD, MICRODATA, LABEL, ATTRIBUTE, CLASS, GENERATED, POSITION = range(7)
KINDS = ("jsonld", "microdata", "label", "attribute", "class", "generated name", "position")
STABLE_ATTRS = ("itemprop", "name", "data-field", "data-name", "data-testid", "data-qa",
                "data-test", "property", "aria-label")
VALUE_ATTRS = ("content", "value", "href", "datetime", "title", "src", "alt")
MAX_TEXT = 300            # an element whose text is longer holds more than one value
MAX_ANCESTORS = 4
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
# Names a build tool generates (CSS modules, styled-components, emotion, hashes): they
# change with the next deploy, so a rule on them is ranked with positions.
_GENERATED = re.compile(
    r"^(css|sc|jsx|emotion|styled|svelte|_)[-_]?[A-Za-z0-9]{4,}$"   # prefixed hashes
    r"|^[A-Za-z]*\d[A-Za-z0-9]*$"                                  # letters and digits mixed
    r"|^[a-z]+[A-Z][A-Za-z]{3,}$"                                  # bdVaJa
    r"|.*__[A-Za-z0-9]{5,}$"                                       # name__hash
    r"|^[A-Za-z0-9_-]*[-_][A-Za-z0-9]{5,}$"                        # name-hash / name_hash
)
_WORDY = re.compile(r"^[a-z][a-z-]*[a-z]$")   # product-name, price, sku: not generated


class LearnError(Exception):
    """The examples cannot be learned from (unreadable, or no page for an example)."""


@dataclass(frozen=True)
class Example:
    page: str                     # the page's file name
    url: str                      # where the page is read as being (relative URLs)
    html: bytes
    fields: dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    rule: FieldRule
    rank: int                     # its stability (see the module docstring)
    size: int                     # selector parts: fewer is more general

    @property
    def order(self) -> tuple[int, int, int, str]:
        return (self.rank, self.size, len(_rule_text(self.rule)), _rule_text(self.rule))


@dataclass
class FieldResult:
    name: str
    type: str
    rule: FieldRule | None
    kind: str | None = None               # the rule's stability class
    precision: float | None = None        # on the held-back examples
    recall: float | None = None
    held_back: int = 0                    # examples held back (one at a time)
    fits: int = 0                         # examples the chosen (or closest) rule is right on
    examples: int = 0
    disagree: list[str] = field(default_factory=list)   # "page: found X, want Y"

    def describe(self) -> str:
        if self.rule is None:
            return (f"{self.name}: no rule explains every example ({self.fits} of "
                    f"{self.examples} at best); it disagrees with: "
                    + "; ".join(self.disagree))
        scores = (f"precision {self.precision:.2f}, recall {self.recall:.2f} on "
                  f"{self.held_back} held back" if self.precision is not None
                  else "too few examples to hold one back")
        return f"{self.name}: {_rule_text(self.rule)} ({self.kind}; {scores})"


@dataclass
class Learned:
    fields: dict[str, FieldResult]

    @property
    def ok(self) -> bool:
        return all(f.rule is not None for f in self.fields.values())

    def extract_block(self) -> dict[str, Any]:
        """An ``extract:`` block a sources file accepts, of the fields learned."""
        return {"kind": "rules", "fields": {
            name: f.rule.model_dump(exclude_none=True, exclude_defaults=False)
            for name, f in self.fields.items() if f.rule is not None}}


def _rule_text(rule: FieldRule) -> str:
    for kind in ("jsonld", "microdata", "label", "css", "xpath"):
        value = getattr(rule, kind)
        if value is not None:
            return f"{kind} {value!r}" + (f" @{rule.attr}" if rule.attr else "")
    return "?"


# -- types ------------------------------------------------------------------------------
def field_type(values: Sequence[Any]) -> str:
    """The type records hold these values in (as the examples give them)."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "int" if all(isinstance(v, int) for v in present) else "price"
    texts = [str(v) for v in present]
    if texts and all(_DATETIME.match(t) for t in texts):
        return "datetime"
    if texts and all(_DATE.fullmatch(t) for t in texts):
        return "date"
    if texts and all(re.match(r"https?://", t) for t in texts):
        return "url"
    return "text"


def same(kind: str, got: Any, want: Any) -> bool:
    """Whether an extracted value (already coerced to ``kind``) is the example's."""
    if got is None or want is None:
        return False
    if kind in ("int", "price", "float"):
        try:
            return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-6)
        except (TypeError, ValueError):
            return False
    if kind == "datetime":
        return bool(coerce("datetime", want) == got)
    return " ".join(str(got).split()) == " ".join(str(want).split())


# -- candidates -------------------------------------------------------------------------
class _ExamplePage:
    """An example page, read once: the view the extractor uses, and lxml's tree."""

    def __init__(self, example: Example) -> None:
        self.example = example
        page = Page(example.url, "text/html", example.html)
        self.html = page_text(page)
        self.tree: LexborHTMLParser = parse_html(page)
        self.view = PageView(self.tree, self.html, example.url)

    @property
    def document(self) -> HtmlElement | None:
        return self.view.document


def _rule(**kw: Any) -> FieldRule:
    return FieldRule.model_validate({k: v for k, v in kw.items() if v is not None})


def _generated(name: str) -> bool:
    return not _WORDY.match(name) and bool(_GENERATED.match(name))


def _css_ident(value: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", value))


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _simple(el: HtmlElement) -> list[tuple[str, int]]:
    """Selectors of ``el`` alone, with their stability rank: by its stable attributes,
    its id, its classes."""
    tag = el.tag if isinstance(el.tag, str) else "*"
    out: list[tuple[str, int]] = []
    for attr in STABLE_ATTRS:
        v = el.get(attr)
        if v is None:
            continue
        if re.fullmatch(r"[A-Za-z][\w-]{0,40}", v):   # a name (itemprop="price"), not a value
            out.append((f"{tag}[{attr}={_quote(v)}]", ATTRIBUTE))
        out.append((f"{tag}[{attr}]", ATTRIBUTE))
    for attr in el.attrib:
        if attr.startswith("data-") and attr not in STABLE_ATTRS and len(attr) <= 40:
            out.append((f"{tag}[{attr}]", ATTRIBUTE))
    el_id = el.get("id")
    if el_id and _css_ident(el_id):
        out.append((f"#{el_id}", GENERATED if _generated(el_id) else ATTRIBUTE))
    classes = [c for c in (el.get("class") or "").split() if _css_ident(c)]
    for c in classes:
        out.append((f"{tag}.{c}", GENERATED if _generated(c) else CLASS))
    if len(classes) > 1:
        rank = GENERATED if any(_generated(c) for c in classes) else CLASS
        out.append((tag + "".join(f".{c}" for c in classes), rank))
    return out


def _position(el: HtmlElement) -> str:
    """``el``'s path from the nearest ancestor with a stable id (else ``body``) by tags
    and positions among siblings of its tag."""
    parts = []
    node: HtmlElement | None = el
    while node is not None and isinstance(node.tag, str) and node.tag not in ("body", "html"):
        node_id = node.get("id")
        if node is not el and node_id and _css_ident(node_id) and not _generated(node_id):
            parts.append(f"#{node_id}")
            break
        parent = node.getparent()
        same_tag = [s for s in parent if s.tag == node.tag] if parent is not None else [node]
        parts.append(f"{node.tag}:nth-of-type({same_tag.index(node) + 1})"
                     if len(same_tag) > 1 else node.tag)
        node = parent
    else:
        parts.append("body")
    return " > ".join(reversed(parts))


def _css_candidates(el: HtmlElement, attr: str | None, kind: str) -> Iterator[Candidate]:
    own = _simple(el)
    for sel, rank in own:
        yield Candidate(_rule(css=sel, attr=attr, type=kind), rank, 1)
    ancestor = el.getparent()
    for depth in range(MAX_ANCESTORS):
        if ancestor is None or not isinstance(ancestor.tag, str) or ancestor.tag in ("html",
                                                                                      "body"):
            break
        for a_sel, a_rank in _simple(ancestor):
            for sel, rank in own or [(el.tag, CLASS)]:   # a stable ancestor, then a tag
                yield Candidate(_rule(css=f"{a_sel} {sel}", attr=attr, type=kind),
                                max(rank, a_rank), 2 + depth)
        ancestor = ancestor.getparent()
    path = _position(el)
    yield Candidate(_rule(css=path, attr=attr, type=kind), POSITION, path.count(">") + 1)


LABEL_TAGS = ("th", "dt", "label")


def _label_of(el: HtmlElement) -> tuple[str, int] | None:
    """The short text right before ``el`` (its previous sibling element, or its parent's)
    and how label-like it is (1: a ``th``, ``dt`` or ``label``, or text ending in a colon;
    2: any other short element)."""
    for node in (el.getprevious(), el.getparent().getprevious()
                 if el.getparent() is not None and el.getprevious() is None else None):
        if node is not None and isinstance(node.tag, str) and len(node) <= 1:
            text = " ".join(node.text_content().split())
            if 0 < len(text) <= 40 and not (node.tail or "").strip():
                return text.rstrip(":").strip(), (1 if node.tag in LABEL_TAGS
                                                  or text.endswith(":") else 2)
    return None


def _normal(text: str | None) -> str:
    return " ".join((text or "").split())


def candidates(page: _ExamplePage, kind: str, want: Any) -> set[Candidate]:
    """Every rule that finds ``want`` (of type ``kind``) on the page."""
    out: set[Candidate] = set()
    base = page.example.url

    def hit(raw: Any) -> bool:
        return same(kind, coerce(kind, raw, base), want)

    for items, source, rank in ((page.view.jsonld, "jsonld", JSONLD),
                                (page.view.microdata, "microdata", MICRODATA)):
        top = {t for i in items for t in structured.types_of(i)}
        for path, raw in structured.paths(items):
            if hit(raw):   # a path from a top-level object is anchored to the page's item
                out.add(Candidate(_rule(**{source: path, "type": kind}), rank,
                                  1 if path.split(".", 1)[0] in top else 2))
    document = page.document
    if document is None:
        return out
    holding = []   # the elements whose whole text is the value
    for el in document.iter():
        if not isinstance(el.tag, str) or el.tag in ("script", "style", "head", "html"):
            continue
        text = _normal(el.text_content())
        if text and len(text) <= MAX_TEXT and hit(text):
            holding.append(el)
    inner = {el.getparent() for el in holding}
    for el in holding:
        # a wrapper (an element holding one that holds the value) is ranked after it
        wrapper = el in inner
        out.update(Candidate(c.rule, c.rank, c.size + wrapper)
                   for c in _css_candidates(el, None, kind))
        label = _label_of(el)
        if label:
            out.add(Candidate(_rule(label=label[0], type=kind), LABEL, label[1]))
    for el in document.iter():
        if not isinstance(el.tag, str) or el.tag in ("script", "style", "head", "html"):
            continue
        tail = _normal(el.tail)
        if tail and hit(tail):   # <li><b>Price:</b> 12.50</li>: the label names its tail
            own = _normal(el.text_content())
            if 0 < len(own) <= 40:
                out.add(Candidate(_rule(label=own.rstrip(":").strip(), type=kind), LABEL,
                                  1 if own.endswith(":") else 2))
        for attr, value in el.attrib.items():
            if (attr in VALUE_ATTRS or attr.startswith("data-")) and value and hit(value):
                out.update(_css_candidates(el, attr, kind))
    return {c for c in out if c.rule.label is None or label_key(c.rule.label)}


# -- learning ---------------------------------------------------------------------------
def _values(cands: list[Candidate], pages: list[_ExamplePage]) -> dict[Candidate, list[Any]]:
    """Per candidate, the value it gives on each page (coerced)."""
    return {c: [p.view.value(c.rule) for p in pages] for c in cands}


def _choose(values: dict[Candidate, list[Any]], wants: list[Any], kind: str,
            use: Sequence[int], origin: dict[Candidate, set[int]]) -> Candidate | None:
    """The most stable candidate, found on one of the pages ``use``, right on all of them."""
    fitting = [c for c, got in values.items()
               if origin[c] & set(use) and all(same(kind, got[i], wants[i]) for i in use)]
    return min(fitting, key=lambda c: c.order, default=None)


def learn_field(pages: list[_ExamplePage], name: str) -> FieldResult:
    idx = [i for i, p in enumerate(pages) if p.example.fields.get(name) is not None]
    wants = [p.example.fields.get(name) for p in pages]
    kind = field_type([wants[i] for i in idx])
    result = FieldResult(name, kind, None, examples=len(idx))
    origin: dict[Candidate, set[int]] = {}
    for i in idx:
        for c in candidates(pages[i], kind, wants[i]):
            origin.setdefault(c, set()).add(i)
    values = _values(list(origin), pages)
    chosen = _choose(values, wants, kind, idx, origin)
    if chosen is None:
        closest = min(values, key=lambda c: (-sum(same(kind, values[c][i], wants[i])
                                                 for i in idx), c.order), default=None)
        if closest is None:
            result.disagree = [f"{pages[i].example.page}: {wants[i]!r} is nowhere on the page"
                               for i in idx]
            return result
        got = values[closest]
        result.fits = sum(same(kind, got[i], wants[i]) for i in idx)
        result.disagree = [
            f"{pages[i].example.page}: {_rule_text(closest.rule)} finds {got[i]!r}, the example "
            f"says {wants[i]!r}" for i in idx if not same(kind, got[i], wants[i])]
        missing = [i for i in idx if not any(i in o for o in origin.values())]
        result.disagree += [f"{pages[i].example.page}: {wants[i]!r} is nowhere on the page"
                            for i in missing]
        return result
    result.rule, result.kind, result.fits = chosen.rule, KINDS[chosen.rank], len(idx)
    if len(idx) >= 3:   # each example held back once, a rule chosen from the others
        produced = right = 0
        for held in idx:
            rule = _choose(values, wants, kind, [i for i in idx if i != held], origin)
            value = values[rule][held] if rule is not None else None
            produced += value is not None
            right += same(kind, value, wants[held])
        result.held_back = len(idx)
        result.precision = right / produced if produced else 0.0
        result.recall = right / len(idx)
    return result


def learn(examples: Sequence[Example]) -> Learned:
    """Every field named in the examples, learned from them."""
    pages = [_ExamplePage(e) for e in examples]
    names = sorted({n for e in examples for n in e.fields})
    return Learned({n: learn_field(pages, n) for n in names})

