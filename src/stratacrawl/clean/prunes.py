"""trafilatura's three whole-page prunes, selected without lxml's regular-expression
callbacks: the same elements, in the same order, at about a third of the cost.

Before extracting an article trafilatura deletes comment sections and infinite-scroll
containers from the whole page, and before its author search the page's comments,
dates, quotes and the like. It selects them with XPath expressions that test ``id`` and
``class`` by EXSLT regular expressions (``re:test``). lxml answers each such test by a
call into Python that first builds a Python object for the element and its attribute,
for every ``div``, ``section`` or ``span`` of the page: on the simulator's 50 KB news
pages (~600 elements) these three prunes took ~3 ms of an article's ~7 ms. Here each is a
walk over its candidate tags that tests their attributes with the same regular
expressions (compiled as lxml compiles them: ``re.search``, an absent attribute read as
``""``).

:func:`install` puts each in trafilatura's place only where trafilatura's expression is
the one it was written for (compared as text, whitespace aside); an expression a
trafilatura release changed keeps running as trafilatura ships it, and
``tests/unit/clean/test_prunes.py`` fails so the difference is seen. :func:`as_shipped`
runs a block with trafilatura's own expressions (the benchmark's baseline).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import trafilatura.core
import trafilatura.metadata
import trafilatura.xpaths
from lxml.html import HtmlElement

Keep = Callable[[HtmlElement], bool]


class Selection:
    """Called like a compiled lxml ``XPath`` on an element: its descendants whose tag is
    one of ``tags`` and for which ``keep`` holds, in document order. ``path``: the
    expression of trafilatura's it stands for."""

    def __init__(self, path: str, tags: tuple[str, ...], keep: Keep) -> None:
        self.path = path
        self.tags = tags
        self.keep = keep

    def __call__(self, tree: HtmlElement) -> list[HtmlElement]:
        keep = self.keep
        return [e for e in tree.iterdescendants(*self.tags) if keep(e)]


def _attr(e: HtmlElement, name: str) -> str:
    return e.get(name) or ""


# -- infinite-scroll containers (whole follow-up articles appended to the page) -----------
_SCROLL = re.compile(r"mvp-post-add-(?:box|wrap)|infinite-?scroll")
_MVP = re.compile(r"mvp-post-add-(?:box|wrap)")


def _infinite_scroll(e: HtmlElement) -> bool:
    i, c = _attr(e, "id"), _attr(e, "class")
    if not (_SCROLL.search(i) or _SCROLL.search(c)):
        return False
    return (next(e.iterdescendants("h1"), None) is None
            or bool(_MVP.search(i) or _MVP.search(c)))


def _share_buttons(e: HtmlElement) -> bool:
    return "elementor-share-buttons" in _attr(e, "class")


# -- comment sections -----------------------------------------------------------------
_COMMENTS_ID = re.compile(r"^(?:[Cc]omment(?!ary)|comol|disqus_thread|dsq-comments)")
_COMMENTS_CLASS = re.compile(r"^[Cc]omment(?!ary)|(?:article|post)-comments")
_COMMENT_LIST_ID = re.compile(r"^(?:[Cc]omment(?!ary)|comol)")


def _comments(e: HtmlElement) -> bool:
    i, c = _attr(e, "id"), _attr(e, "class")
    if not (_COMMENTS_ID.search(i) or _COMMENTS_CLASS.search(c)):
        return False
    return (e.tag not in ("ol", "ul") or bool(_COMMENT_LIST_ID.search(i))
            or bool(_COMMENTS_CLASS.search(c)))


# -- what the author search must not read --------------------------------------------
_AUTHOR_ID = re.compile(r"^comments|comment-?list|ProductReviews")
_AUTHOR_CLASS = re.compile(
    r"^[Cc]omments|commentlist|comments-list|sidebar|is-hidden|quote|embedly-instagram"
    r"|article-(?:share|support)|print|category|meta-date|meta-reviewer")


def _not_author(e: HtmlElement) -> bool:
    i, c = _attr(e, "id"), _attr(e, "class")
    return (i == "comments" or c in ("comments", "title", "date") or bool(_AUTHOR_ID.search(i))
            or bool(_AUTHOR_CLASS.search(c)) or "Figure" in _attr(e, "data-component"))


# trafilatura's expressions (trafilatura.xpaths, 2.x), each with its replacement
SELECTIONS = [
    Selection("""
        .//*[self::div or self::section or self::aside][
        re:test(@id, 'mvp-post-add-(?:box|wrap)|infinite-?scroll') or
        re:test(@class, 'mvp-post-add-(?:box|wrap)|infinite-?scroll')][
        not(.//h1) or re:test(@id, 'mvp-post-add-(?:box|wrap)') or
        re:test(@class, 'mvp-post-add-(?:box|wrap)')]""",
              ("div", "section", "aside"), _infinite_scroll),
    Selection(".//*[self::div or self::section or self::aside]"
              "[contains(@class, 'elementor-share-buttons')]",
              ("div", "section", "aside"), _share_buttons),
    Selection("""
        .//*[self::div or self::list or self::section or self::details or self::ol or
        self::ul][
        re:test(@id, '^(?:[Cc]omment(?!ary)|comol|disqus_thread|dsq-comments)') or
        re:test(@class, '^[Cc]omment(?!ary)|(?:article|post)-comments')][
        not(self::ol or self::ul) or re:test(@id, '^(?:[Cc]omment(?!ary)|comol)') or
        re:test(@class, '^[Cc]omment(?!ary)|(?:article|post)-comments')]""",
              ("div", "list", "section", "details", "ol", "ul"), _comments),
    Selection("""
        .//*[self::a or self::div or self::section or self::span][
        @id='comments' or @class='comments' or @class='title' or @class='date' or
        re:test(@id, '^comments|comment-?list|ProductReviews') or
        re:test(@class, '^[Cc]omments|commentlist|comments-list|sidebar|is-hidden|quote|
        embedly-instagram|article-(?:share|support)|print|category|meta-date|meta-reviewer')
        or contains(@data-component, 'Figure')]""",
              ("a", "div", "section", "span"), _not_author),
]
# where trafilatura reads each list of prunes when it runs: (module, name)
_USERS = [(trafilatura.core, "RAW_TREE_PRUNE_XPATH"),
          (trafilatura.core, "REMOVE_COMMENTS_AND_LISTS_XPATH"),
          (trafilatura.metadata, "AUTHOR_DISCARD_XPATHS")]


def _text(path: str) -> str:
    """An expression compared without its whitespace (trafilatura spreads them over lines)."""
    return "".join(path.split())


_BY_TEXT = {_text(s.path): s for s in SELECTIONS}


def install() -> int:
    """Put each selection in the place of trafilatura's expression it was written for;
    how many are in place."""
    for module, name in _USERS:
        shipped = getattr(trafilatura.xpaths, name)
        setattr(module, name, [_BY_TEXT.get(_text(x.path), x) for x in shipped])
    return sum(isinstance(x, Selection) for module, name in _USERS
               for x in getattr(module, name))


@contextlib.contextmanager
def as_shipped() -> Iterator[None]:
    """trafilatura's own expressions for the block (a baseline to measure against)."""
    saved: list[tuple[Any, str, Any]] = [(m, n, getattr(m, n)) for m, n in _USERS]
    for module, name in _USERS:
        setattr(module, name, getattr(trafilatura.xpaths, name))
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
