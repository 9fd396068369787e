"""URL equivalence rules: which URL variants of one site serve the same page.

Static canonicalization (``urls.canonicalize``) cannot know that ``ref`` is noise on one
site and an id on another, or that ``/article/6/`` and ``/article/6`` are one page. The
pages say so: two URLs of one host whose content fingerprints are equal. From every such
pair ``explain`` derives the rules that make the two one, of three kinds real sites
produce:

- ``drop-param:NAME`` — a query parameter that never changes the content;
- ``rename-param:ALIAS=NAME`` — two names of one parameter (``?item=5`` and ``?id=5``);
- ``trailing-slash`` — a path with and without its trailing slash;
- ``path-case`` — the case of the path.

(The order of query parameters needs no rule: canonical forms sort them.) A page's
``rel=canonical`` naming another URL of its host is the site saying the two are one page:
such a pair is evidence like an equal fingerprint.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

KINDS = ("drop-param", "rename-param", "trailing-slash", "path-case")
MIN_SUPPORT = 3          # confirming pairs before a rule applies (none against it)
MAX_SIBLING_PARAMS = 8   # a query of more parameters: no sibling drops them one by one
VERIFY_EVERY = 20        # one variant in this many is still fetched: the rule stays tested
_ESCAPE = re.compile(r"%[0-9a-f]{2}")


@dataclass(frozen=True, order=True)
class Rule:
    kind: str
    arg: str = ""         # drop-param: the parameter; rename-param: ALIAS=NAME
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
        if (kind in ("drop-param", "rename-param")) != bool(arg):
            raise ValueError(f"URL rule {text!r}: drop-param takes a parameter name "
                             "(drop-param:NAME), rename-param two (rename-param:ALIAS=NAME), "
                             "the other kinds none")
        if kind == "rename-param" and not re.fullmatch(r"[^=&]+=[^=&]+", arg):
            raise ValueError(f"URL rule {text!r}: rename-param:ALIAS=NAME renames ALIAS "
                             "to NAME")
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
    renames = dict(r.arg.split("=", 1) for r in covering if r.kind == "rename-param")
    if (drop or renames) and query:
        items = _query_items(query)
        for _ in range(len(renames) + 1):   # renames may chain: to a fixed point
            present = {k for k, _ in items}
            before = items
            items = [(renames[k] if k in renames and renames[k] not in present else k, v)
                     for k, v in items]
            items = [(k, v) for k, v in items if k not in drop]
            if items == before:
                break
        query = "&".join(f"{k}={v}" for k, v in (sorted(items) if renames else items))
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def candidates(rules: Iterable[Rule]) -> str:
    """A PostgreSQL regular expression matching every URL that ``rules`` may rewrite (and
    some they leave as they are): a cheap first look in SQL before :func:`apply`."""
    parts = []
    for r in rules:
        if r.kind in ("drop-param", "rename-param"):
            parts.append(f"[?&]{re.escape(r.arg.split('=', 1)[0])}=")
        elif r.kind == "trailing-slash":
            parts.append("://[^/]+/[^?#]*/([?#]|$)")
        else:
            parts.append("://[^/]+/[^?#]*[A-Z]")
    return "|".join(sorted(set(parts))) or "$^"


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
    only_a = {k for k, _ in qa} - {k for k, _ in qb}
    only_b = {k for k, _ in qb} - {k for k, _ in qa}
    renamed: set[str] = set()
    if len(only_a) == len(only_b) == 1:   # one parameter under two names, same value?
        (x,), (y,) = only_a, only_b
        if sorted(v for k, v in qa if k == x) == sorted(v for k, v in qb if k == y):
            alias, name = max(x, y), min(x, y)
            rules.add(Rule("rename-param", f"{alias}={name}", scope))
            renamed = {x, y}
    for name in ({k for k, _ in qa} | {k for k, _ in qb}) - renamed:
        if sorted(v for k, v in qa if k == name) != sorted(v for k, v in qb if k == name):
            rules.add(Rule("drop-param", name, scope))
    if not rules or apply(rules, a) != apply(rules, b):
        return None
    return frozenset(rules)


def siblings(canonical: str) -> list[str]:
    """The plainer forms of canonical URL ``canonical`` that rules of these kinds could
    map it onto (for each, :func:`explain` names the rules): without its query or one of
    its parameters, without its trailing slash, with its path in lower case, and their
    combinations. Plainer only: a URL is never a sibling of its own siblings."""
    if "?" not in canonical and not canonical.endswith("/") and canonical.islower():
        return []   # most item URLs: nothing to drop or lower (not split and rebuilt)
    parts = urlsplit(canonical)
    paths = {parts.path}
    if len(parts.path) > 1 and parts.path.endswith("/"):
        paths.add(parts.path.rstrip("/") or "/")
    paths |= {_ESCAPE.sub(lambda m: m.group().upper(), p.lower()) for p in paths}
    params = parts.query.split("&") if parts.query else []
    queries = {parts.query, ""}
    if 1 < len(params) <= MAX_SIBLING_PARAMS:
        queries |= {"&".join(params[:i] + params[i + 1:]) for i in range(len(params))}
    out = {urlunsplit((parts.scheme, parts.netloc, p, q, "")) for p in paths for q in queries}
    out.discard(canonical)
    return sorted(out)


def _changes(rule: Rule, url: str, path: str) -> bool:
    """A cheap look before ``apply``: could ``rule`` change ``url`` (path ``path``) at all?"""
    if rule.kind == "drop-param":
        return f"{rule.arg}=" in url
    if rule.kind == "rename-param":
        return f"{rule.arg.split('=', 1)[0]}=" in url
    if rule.kind == "trailing-slash":
        return len(path) > 1 and path.endswith("/")
    return path != path.lower()


@dataclass
class RuleStats:
    support: int = 0
    counterexamples: int = 0
    example: str | None = None


def mine(pages: dict[str, tuple[str, str]], *, declared: Mapping[str, str] | None = None,
         forbidden: Iterable[Rule] = ()) -> dict[Rule, RuleStats]:
    """Rules and their evidence from ``pages`` (canonical URL → (content fingerprint,
    path)) and ``declared`` links (a page's URL → the canonical URL its rel=canonical
    names: the site saying they are one page, even where a timestamp or an ad makes
    their bytes differ). A counterexample is two fetched pages the rule merges whose
    content differs — unless one names the other as its canonical."""
    declared = declared or {}
    banned = set(forbidden)
    by_content: dict[str, list[str]] = {}
    for url, (content, _) in pages.items():
        by_content.setdefault(content, []).append(url)
    stats: dict[Rule, RuleStats] = {}
    seen: set[tuple[str, str]] = set()

    def support(a: str, b: str, sign: str) -> None:
        pair = (a, b) if a < b else (b, a)
        if pair in seen:
            return
        seen.add(pair)
        for rule in explain(a, b) or ():
            if rule not in banned:
                s = stats.setdefault(rule, RuleStats())
                s.support += 1
                s.example = s.example or f"{a} {sign} {b}"

    for urls in by_content.values():
        if len(urls) < 2:
            continue
        urls.sort()
        for i, a in enumerate(urls):
            for b in urls[i + 1:i + 8]:   # a page's variants: a handful, not a clique of all
                support(a, b, "=")
    for a, b in declared.items():
        support(a, b, "→")
    for rule, s in stats.items():   # a counterexample: two URLs it merges, content differs
        merged: dict[str, set[str]] = {}
        for url, (content, path) in pages.items():
            if rule.covers(path):
                key = apply([rule], url) if _changes(rule, url, path) else url
                if key != url and declared.get(url) == key:
                    continue   # the page itself names the URL it is merged into
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
