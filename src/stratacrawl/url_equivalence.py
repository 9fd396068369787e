"""URL equivalence rules: which URL variants of one site serve the same page.

Static canonicalization (``urls.canonicalize``) cannot know that ``ref`` is noise on one
site and an id on another, or that ``/article/6/`` and ``/article/6`` are one page. The
pages say so: two URLs of one host whose content fingerprints are equal. From every such
pair ``explain`` derives the rules that make the two one, of three kinds real sites
produce:

- ``drop-param:NAME`` — a query parameter that never changes the content;
- ``trailing-slash`` — a path with and without its trailing slash;
- ``path-case`` — the case of the path.

Each rule is scoped to the first path segment it was seen under (``@/article/``), since
a parameter may matter on some paths and not on others. ``mine`` counts a rule's
**support** (URL pairs it explains) and its **counterexamples** (URL pairs it would merge
whose content differs): it is active with ``MIN_SUPPORT`` pairs and no counterexample,
and revoked by one counterexample. ``apply`` rewrites a canonical URL with the rules that
cover it; it is idempotent. An active rule would hide its own counterexamples (the
variants it maps are no longer fetched), so one variant in ``VERIFY_EVERY`` — chosen by
its URL, the same one every time — is still fetched (``verifies``): each such fetch is one
more confirming pair, or the counterexample that revokes the rule.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

KINDS = ("drop-param", "trailing-slash", "path-case")
MIN_SUPPORT = 3          # confirming pairs before a rule applies (none against it)
VERIFY_EVERY = 20        # one variant in this many is still fetched: the rule stays tested
_ESCAPE = re.compile(r"%[0-9a-f]{2}")


@dataclass(frozen=True, order=True)
class Rule:
    kind: str
    arg: str = ""         # the parameter of drop-param
    scope: str = "/"      # "/" (every path) or a first path segment, "/article/"

    def text(self) -> str:
        out = self.kind + (f":{self.arg}" if self.arg else "")
        return out + (f"@{self.scope}" if self.scope != "/" else "")

    @classmethod
    def parse(cls, text: str) -> Rule:
        """``drop-param:ref``, ``trailing-slash@/article/``, ``path-case``, …"""
        body, _, scope = text.strip().partition("@")
        kind, _, arg = body.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown URL rule {text!r} (kinds: {', '.join(KINDS)})")
        if (kind == "drop-param") != bool(arg):
            raise ValueError(f"URL rule {text!r}: drop-param takes a parameter name "
                             "(drop-param:NAME), the other kinds none")
        scope = scope or "/"
        if not re.fullmatch(r"/([^/?#]+/)?", scope):
            raise ValueError(f"URL rule {text!r}: the scope is / or one path segment, /name/")
        return cls(kind, arg, scope.lower())

    def covers(self, path: str) -> bool:
        return self.scope == "/" or path.lower().startswith(self.scope)


def scope_of(path: str) -> str:
    """The first path segment of a path that has more than one: ``/article/6`` → ``/article/``."""
    head, sep, _ = path.lstrip("/").partition("/")
    return f"/{head.lower()}/" if head and sep else "/"


def _query_items(query: str) -> list[tuple[str, str]]:
    return [(k, v) for k, _, v in (p.partition("=") for p in query.split("&") if p)]


def apply(rules: Iterable[Rule], canonical: str) -> str:
    """``canonical`` (a URL ``canonicalize`` returned) with the rules that cover it applied."""
    parts = urlsplit(canonical)
    path, query = parts.path, parts.query
    covering = [r for r in rules if r.covers(path)]
    if not covering:
        return canonical
    drop = {r.arg for r in covering if r.kind == "drop-param"}
    for r in covering:
        if r.kind == "trailing-slash" and len(path) > 1 and path.endswith("/"):
            path = path.rstrip("/") or "/"
        elif r.kind == "path-case":
            path = _ESCAPE.sub(lambda m: m.group().upper(), path.lower())
    if drop and query:
        query = "&".join(f"{k}={v}" for k, v in _query_items(query) if k not in drop)
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def explain(a: str, b: str) -> frozenset[Rule] | None:
    """The rules that make canonical URLs ``a`` and ``b`` (same content) one, or None
    when no rule of these kinds does (another host, another path)."""
    pa, pb = urlsplit(a), urlsplit(b)
    if (pa.scheme, pa.netloc) != (pb.scheme, pb.netloc) or a == b:
        return None
    scope = scope_of(pa.path)
    rules: set[Rule] = set()
    if pa.path != pb.path:
        ta, tb = pa.path.rstrip("/") or "/", pb.path.rstrip("/") or "/"
        if ta != tb:
            if ta.lower() != tb.lower():
                return None
            rules.add(Rule("path-case", "", scope))
        if pa.path.endswith("/") != pb.path.endswith("/"):
            rules.add(Rule("trailing-slash", "", scope))
    qa, qb = _query_items(pa.query), _query_items(pb.query)
    for name in {k for k, _ in qa} | {k for k, _ in qb}:
        if sorted(v for k, v in qa if k == name) != sorted(v for k, v in qb if k == name):
            rules.add(Rule("drop-param", name, scope))
    if not rules or apply(rules, a) != apply(rules, b):
        return None
    return frozenset(rules)


def _changes(rule: Rule, url: str, path: str) -> bool:
    """A cheap look before ``apply``: could ``rule`` change ``url`` (path ``path``) at all?"""
    if rule.kind == "drop-param":
        return f"{rule.arg}=" in url
    if rule.kind == "trailing-slash":
        return len(path) > 1 and path.endswith("/")
    return path != path.lower()


@dataclass
class RuleStats:
    support: int = 0
    counterexamples: int = 0
    example: str | None = None


def mine(pages: dict[str, tuple[str, str]], *,
         forbidden: Iterable[Rule] = ()) -> dict[Rule, RuleStats]:
    """Rules and their evidence from ``pages`` (canonical URL → (content fingerprint,
    path))."""
    banned = set(forbidden)
    by_content: dict[str, list[str]] = {}
    for url, (content, _) in pages.items():
        by_content.setdefault(content, []).append(url)
    stats: dict[Rule, RuleStats] = {}
    for urls in by_content.values():
        if len(urls) < 2:
            continue
        urls.sort()
        for i, a in enumerate(urls):
            for b in urls[i + 1:i + 8]:   # a page's variants: a handful, not a clique of all
                for rule in explain(a, b) or ():
                    if rule in banned:
                        continue
                    s = stats.setdefault(rule, RuleStats())
                    s.support += 1
                    s.example = s.example or f"{a} = {b}"
    for rule, s in stats.items():   # a counterexample: two URLs it merges, content differs
        merged: dict[str, set[str]] = {}
        for url, (content, path) in pages.items():
            if rule.covers(path):
                key = apply([rule], url) if _changes(rule, url, path) else url
                merged.setdefault(key, set()).add(content)
        s.counterexamples = sum(len(contents) - 1 for contents in merged.values())
    return stats


def state_of(s: RuleStats) -> str:
    if s.counterexamples:
        return "revoked"
    return "active" if s.support >= MIN_SUPPORT else "candidate"


def verifies(canonical: str) -> bool:
    """Whether this variant is one of the few still fetched to keep its rule tested."""
    digest = hashlib.blake2b(canonical.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % VERIFY_EVERY == 0


def rewrite(canonical: str, pinned: Sequence[Rule], learned: Sequence[Rule]) -> str:
    """``canonical`` under a source's pinned rules (always) and learned rules (except for
    the variants kept as verification fetches)."""
    out = apply(pinned, canonical) if pinned else canonical
    if learned and not verifies(out):
        out = apply(learned, out)
    return out
