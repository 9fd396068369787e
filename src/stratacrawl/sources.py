"""``sources.yaml``: what to crawl and how, one entry per source.

A source is the unit of isolation: its own rate, concurrency, batch size,
cadence, robots policy, extraction rules and data-quality expectations.
``load_sources`` reports *every* problem of a file at once, each naming the
file, the source id and the field.
"""

from __future__ import annotations

import functools
import io
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import parsel
import yaml
from lxml import etree
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stratacrawl.errors import InvalidURL, SourcesError, clip
from stratacrawl.urls import canonicalize
from stratacrawl.urls.equivalence import Rule

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str | int | float) -> timedelta:
    """``"30m"`` → 30 minutes. Plain numbers are seconds."""
    if isinstance(text, int | float):
        return timedelta(seconds=float(text))
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"expected a duration like 30s, 15m, 6h, 1d; got {text!r}")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def _check_duration(value: str | None) -> str | None:
    """A duration field's text, kept as written once it parses (None: not set)."""
    if value is not None:
        parse_duration(value)
    return value


# ``allow``, ``follow`` and ``items`` are the user's regular expressions, run on every link
# a crawl finds — text from strangers. They run on RE2, whose time is linear in the URL
# whatever the pattern (Python's backtracking engine takes exponential time on a pattern
# like ``(a+)+$`` and a URL built to defeat it). RE2 has no backreferences or lookaround:
# such a pattern is refused with the way out.
_NOT_LINEAR = ("backreferences (\\1) and lookaround ((?=…), (?!…), (?<=…), (?<!…)) need a "
               "backtracking engine; rewrite the pattern without them (often: match the text "
               "itself, or split it into several patterns)")


@functools.cache
def _re2_options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False     # (its C++ logger would print each refusal to stderr)
    options.never_capture = True   # only whether it matches is asked
    return options


URL_PATTERN_KINDS = ("allow", "follow", "items")


@functools.lru_cache(maxsize=1024)
def _pattern_set(patterns: tuple[tuple[str, ...], ...]) -> tuple[Any, tuple[str, ...]]:
    """One RE2 set of every pattern of a source (``patterns``: one tuple per kind of
    :data:`URL_PATTERN_KINDS`) and the kind of each pattern in the set: a single pass
    over a URL tells every kind it matches (~0.8 us, where three separate searches
    through the binding cost ~5)."""
    import re2

    found = re2.Set.SearchSet(_re2_options())
    kinds = []
    for kind, group in zip(URL_PATTERN_KINDS, patterns, strict=True):
        for p in group:
            found.Add(p)
            kinds.append(kind)
    found.Compile()
    return found, tuple(kinds)


def _check_regexes(values: list[str]) -> list[str]:
    import re2

    for v in values:
        try:
            re2.compile(v, _re2_options())
        except re2.error as e:
            reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
            if "perl operator" in reason or "escape sequence: \\" in reason:
                raise ValueError(f"{clip(v)!r} cannot run in linear time ({reason}): "
                                 f"{_NOT_LINEAR}") from None
            raise ValueError(f"bad regular expression {clip(v)!r}: {reason}") from None
    return values


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


FieldType = Literal["text", "int", "float", "price", "date", "datetime", "url"]


class FieldRule(_Strict):
    """How to extract one field, and a type to coerce it to. Exactly one source:

    - ``css`` or ``xpath``: the first element matching (its text, or ``attr``);
    - ``jsonld``: a path into the page's schema.org JSON-LD, ``Type.key.key`` (the first
      object of that ``@type``, then keys; a list takes its first element), e.g.
      ``Product.offers.price``;
    - ``microdata``: the same path into the page's schema.org microdata
      (``itemtype``/``itemprop``), e.g. ``Product.brand.name``;
    - ``label``: the value a label names — the element after the first ``th``, ``dt``,
      ``label`` or other short element whose whole text is the label (case and a
      trailing colon aside), or the text after the label in its own element: a
      label/value table whose row order differs from page to page.
    """

    css: str | None = None
    xpath: str | None = None
    jsonld: str | None = None
    microdata: str | None = None
    label: str | None = None
    attr: str | None = None  # take an attribute instead of the text (css, xpath, label)
    type: FieldType = "text"

    @model_validator(mode="after")
    def _one_selector(self) -> FieldRule:
        given = [k for k in ("css", "xpath", "jsonld", "microdata", "label")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of css, xpath, jsonld, microdata or label"
                             + (f" (given: {', '.join(given)})" if given else ""))
        if self.css is not None:
            try:
                parsel.Selector(text="<html></html>").css(self.css)
            except Exception as e:
                raise ValueError(f"bad CSS selector {self.css!r}: {e}") from None
        if self.xpath is not None:
            try:
                etree.XPath(self.xpath)
            except etree.XPathSyntaxError as e:
                raise ValueError(f"bad XPath {self.xpath!r}: {e}") from None
        for kind in ("jsonld", "microdata"):
            path = getattr(self, kind)
            if path is not None and not re.fullmatch(r"[A-Za-z][\w-]*(\.[@\w-]+)+", path):
                raise ValueError(f"bad {kind} path {path!r}: Type.key[.key…], e.g. "
                                 "Product.offers.price")
        if self.label is not None and not self.label.strip():
            raise ValueError("label: the text of the label, e.g. Price")
        if self.attr is not None and (self.jsonld or self.microdata):
            raise ValueError("attr goes with css, xpath or label, not a structured-data path")
        return self

    @property
    def structured(self) -> bool:
        return self.jsonld is not None or self.microdata is not None


ARTICLE_FIELDS: dict[str, str] = {"title": "text", "text": "text", "author": "text",
                                  "published": "datetime", "language": "text"}


class ArticleExtract(_Strict):
    """Generic article extraction (title, text, author, published, language), plus any
    extra ``fields`` by selector."""

    kind: Literal["article"] = "article"
    fields: dict[str, FieldRule] = Field(default_factory=dict)


class RulesExtract(_Strict):
    kind: Literal["rules"]
    fields: dict[str, FieldRule] = Field(min_length=1)


class JsonField(_Strict):
    """One field of a JSON record: a dotted path into the object and a type."""

    path: str
    type: FieldType = "text"


class JsonExtract(_Strict):
    """Records from JSON: ``items`` is a dotted path to a list of objects (absent: the page
    is one object); ``fields`` pick and type values (empty: every top-level scalar as is)."""

    kind: Literal["json"]
    items: str | None = None
    fields: dict[str, JsonField] = Field(default_factory=dict)


Extract = Annotated[ArticleExtract | RulesExtract | JsonExtract, Field(discriminator="kind")]


class AlertThresholds(_Strict):
    """When a source's alerts fire (defaults below); a condition must hold for
    ``STRATACRAWL_ALERT_HOLD_S`` (3 minutes) before it fires."""

    success_alert: Annotated[float, Field(gt=0, le=1)] = 0.98      # below: P2
    success_severe: Annotated[float, Field(gt=0, le=1)] = 0.90     # below: P1
    latency_attention: Annotated[float, Field(gt=1)] = 1.3         # times the baseline mean: P2
    latency_intervene: Annotated[float, Field(gt=1)] = 2.0         # times the baseline mean: P1
    retry_ratio: Annotated[float, Field(gt=0)] = 0.05              # above: P2
    ingest_ratio: Annotated[float, Field(gt=0, le=1)] = 0.8        # staged / ok fetched: P1
    backlog_growth: Annotated[float, Field(gt=0)] = 0.2            # over 15 minutes: P3
    stopped_after: str = "15m"                                     # no success, work due: P0
    stalled_after: str = "2m"                                      # no request, work due: P1
    min_requests: Annotated[int, Field(ge=1)] = 20                 # rates need this many
    # the pages cleaned last that the minute-level integrity check reads (default: those
    # of the last minute, at least the last 3, at most 200)
    integrity_pages: Annotated[int, Field(ge=10, le=500)] | None = None

    _duration = field_validator("stopped_after", "stalled_after")(_check_duration)


class UrlRules(_Strict):
    """Learned URL equivalence rules of a source (see ``stratacrawl.urls.equivalence``):
    ``learn`` them from the fetched pages, ``pin`` rules to apply from the start, ``forbid``
    rules never to apply — each written ``drop-param:NAME``, ``rename-param:ALIAS=NAME``,
    ``trailing-slash`` or ``path-case``, optionally scoped ``@/segment/``."""

    learn: bool = True
    pin: list[str] = Field(default_factory=list)
    forbid: list[str] = Field(default_factory=list)

    @field_validator("pin", "forbid")
    @classmethod
    def _rules(cls, v: list[str]) -> list[str]:
        for text in v:
            Rule.parse(text)
        return v

    @property
    def pinned(self) -> tuple[Rule, ...]:
        return tuple(Rule.parse(t) for t in self.pin)

    @property
    def forbidden(self) -> tuple[Rule, ...]:
        return tuple(Rule.parse(t) for t in self.forbid)


class Recrawl(_Strict):
    """When a recurring page is fetched again (see ``stratacrawl.frontier.recrawl``): with
    ``adaptive`` each URL's interval shrinks when its content changed since the last
    fetch and grows when it did not, from the source's ``cadence`` and between
    ``min_interval`` and ``max_interval``; without, every recurring URL is due again
    each ``cadence``. ``items`` makes item pages recur too (prices, stock: pages that
    change in place); ``daily_budget`` caps the re-fetches of the source per UTC day
    (new URLs are not counted), the rest wait for the next day."""

    adaptive: bool = True
    min_interval: str | None = None    # default: half the cadence
    max_interval: str | None = None    # default: a day, or the cadence if that is longer
    items: bool = False
    daily_budget: Annotated[int, Field(ge=0)] | None = None

    _duration = field_validator("min_interval", "max_interval")(_check_duration)


class Source(_Strict):
    """One source of ``sources.yaml``."""

    id: Annotated[str, Field(pattern=r"^[a-z0-9_-]+$", max_length=64)]
    seeds: list[str] = Field(min_length=1)
    allow: list[str] = Field(default_factory=list)
    follow: list[str] = Field(default_factory=list)
    items: list[str] = Field(default_factory=list)
    sitemaps: bool = True
    rate: Annotated[float, Field(gt=0, le=10_000)] = 1.0
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 2
    batch_size: Annotated[int, Field(ge=1, le=10_000)] = 10
    cadence: str = "1h"
    priority: Annotated[int, Field(ge=0, le=9)] = 5
    robots: Literal["obey", "ignore"] = "obey"
    allow_private_networks: bool = False
    extract: Extract = Field(default_factory=ArticleExtract)
    required: list[str] = Field(default_factory=list)
    expected_daily: Annotated[int, Field(ge=0)] | None = None
    freshness: str = "1d"
    snapshots: bool = False
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 30.0
    # A fetch's whole time (attempts, redirects, body); None: STRATACRAWL_FETCH_DEADLINE_S.
    deadline_s: Annotated[float, Field(gt=0, le=3600)] | None = None
    max_bytes: Annotated[int, Field(gt=0)] = 5 * 1024 * 1024
    alerts: AlertThresholds = Field(default_factory=AlertThresholds)
    url_rules: UrlRules = Field(default_factory=UrlRules)
    recrawl: Recrawl = Field(default_factory=Recrawl)
    # a repair of this source's rules (after its site changed layout) waits for an
    # operator's approval (``review``), or applies itself when every field's rule was right
    # on every pair held back and found at least 95 % of them (``auto``)
    repair: Literal["review", "auto"] = "review"

    _regexes = field_validator("allow", "follow", "items")(_check_regexes)

    @field_validator("seeds")
    @classmethod
    def _seeds_are_urls(cls, v: list[str]) -> list[str]:
        """Each seed an absolute http(s) URL: refused here, not dropped at crawl time."""
        bad = []
        for url in v:
            try:
                canonicalize(url)
            except InvalidURL as e:
                bad.append(f"{url!r} ({e.reason})")
        if bad:
            raise ValueError("not an absolute http(s) URL: " + ", ".join(bad))
        return v

    _duration = field_validator("cadence", "freshness")(_check_duration)

    @model_validator(mode="after")
    def _seeds_in_scope(self) -> Source:
        """A source with ``allow`` patterns crawls nothing outside them, its seeds neither:
        a seed no pattern matches is refused here, not fetched (or silently dropped)."""
        if not self.allow:
            return self
        outside = [url for url in self.seeds if not self.matches("allow", canonicalize(url))]
        if outside:
            shown = ", ".join(repr(p) for p in self.allow)
            raise ValueError(f"seed(s) {', '.join(repr(u) for u in outside)} outside "
                             f"allow (no pattern matches: {shown})")
        return self

    @model_validator(mode="after")
    def _required_fields_exist(self) -> Source:
        declared = set(getattr(self.extract, "fields", {}))
        if isinstance(self.extract, ArticleExtract):
            declared |= set(ARTICLE_FIELDS)
        if declared or not isinstance(self.extract, JsonExtract):
            unknown = [f for f in self.required if f not in declared]
            if unknown:
                raise ValueError(f"required field(s) {unknown} are not extracted "
                                 f"(extracted: {sorted(declared)})")
        return self

    @model_validator(mode="after")
    def _interval_bounds(self) -> Source:
        if self.recrawl.max_interval and self.max_interval_td < self.cadence_td:
            raise ValueError(f"recrawl.max_interval {self.recrawl.max_interval!r} is shorter "
                             f"than cadence {self.cadence!r}")
        if self.recrawl.min_interval and self.min_interval_td > self.cadence_td:
            raise ValueError(f"recrawl.min_interval {self.recrawl.min_interval!r} is longer "
                             f"than cadence {self.cadence!r}")
        return self

    @property
    def min_interval_td(self) -> timedelta:
        """The shortest re-crawl interval of this source's URLs (adaptive re-crawl: a page
        that changes on most fetches is fetched more often than the cadence, down to this)."""
        if self.recrawl.min_interval:
            return parse_duration(self.recrawl.min_interval)
        return self.cadence_td / 2

    @property
    def max_interval_td(self) -> timedelta:
        """The longest re-crawl interval of this source's URLs."""
        if self.recrawl.max_interval:
            return parse_duration(self.recrawl.max_interval)
        return max(timedelta(days=1), self.cadence_td)

    @property
    def cadence_td(self) -> timedelta:
        return parse_duration(self.cadence)

    @property
    def freshness_td(self) -> timedelta:
        return parse_duration(self.freshness)

    @property
    def field_types(self) -> dict[str, str]:
        """Every field this source's records carry, with its declared type."""
        types: dict[str, str] = {}
        if isinstance(self.extract, ArticleExtract):
            types.update(ARTICLE_FIELDS)
        types.update({name: rule.type for name, rule in getattr(self.extract, "fields", {}).items()})
        for name in self.required:
            types.setdefault(name, "text")
        return types

    def matches(self, kind: Literal["allow", "follow", "items"], url: str) -> bool:
        """Whether any pattern of ``kind`` matches ``url`` (RE2: linear time)."""
        return bool(getattr(self, kind)) and kind in self.kinds_of(url)

    def kinds_of(self, url: str) -> frozenset[str]:
        """Which of ``allow``, ``follow``, ``items`` have a pattern matching ``url``."""
        if not (self.allow or self.follow or self.items):
            return frozenset()
        found, kinds = _pattern_set((tuple(self.allow), tuple(self.follow), tuple(self.items)))
        return frozenset(kinds[i] for i in found.Match(url.encode()) or ())   # (None: none)


class SourcesFile(BaseModel):
    """The parsed file: sources in file order, looked up by id."""

    path: str
    sources: list[Source]

    def _index(self) -> dict[str, Source]:
        """Sources by id, built at the first lookup (a cleaner looks up every page's source,
        a fetch worker every source it claims for, and files hold thousands)."""
        listed, by_id = self._indexed
        if listed is not self.sources:   # a copy given other sources: index those
            del self.__dict__["_indexed"]
            listed, by_id = self._indexed
        return by_id

    @functools.cached_property
    def _indexed(self) -> tuple[list[Source], dict[str, Source]]:
        # (in the instance's __dict__, read as a plain attribute: a pydantic private
        # attribute costs ~4 us a read; equality compares the fields only)
        return self.sources, {s.id: s for s in self.sources}

    def get(self, source_id: str) -> Source:
        """The source ``source_id``; KeyError naming the file and the ids it has."""
        found = self._index().get(source_id)
        if found is not None:
            return found
        known = ", ".join(self.ids[:20]) + (f" and {len(self.ids) - 20} more"
                                             if len(self.ids) > 20 else "")
        raise KeyError(f"{self.path}: no source {clip(source_id)!r} (it has {known or 'none'})")

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.sources]

    def has(self, source_id: str) -> bool:
        return source_id in self._index()


def _describe(err: Any) -> tuple[str, str]:
    loc = ".".join(str(p) for p in err["loc"]) or "(source)"
    if err["type"] == "extra_forbidden":
        return loc, "unknown key"
    msg = clip(err["msg"].removeprefix("Value error, "), 400)   # (it may quote the input)
    return loc, msg


def parse_sources(data: Any, path: str = "<sources>") -> SourcesFile:
    """Validate already-loaded YAML data; raises :class:`SourcesError` with every problem."""
    problems: list[str] = []
    raw = data.get("sources") if isinstance(data, dict) else data
    if isinstance(data, dict) and set(data) - {"sources"}:
        for key in sorted(set(data) - {"sources"}):
            problems.append(f"{path}: top level: {key}: unknown key (expected only 'sources')")
    if not isinstance(raw, list):
        raise SourcesError(path, [f"{path}: expected a list under 'sources:'"])
    if not raw:
        raise SourcesError(path, [f"{path}: sources: the list is empty (nothing to crawl)"])
    sources: list[Source] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        sid = entry.get("id") if isinstance(entry, dict) else None
        label = f"source {clip(str(sid))!r}" if sid else f"source #{i + 1}"
        if not isinstance(entry, dict):
            problems.append(f"{path}: {label}: expected a mapping")
            continue
        if isinstance(sid, str):
            if sid in seen:
                problems.append(
                    f"{path}: {label}: id: duplicate id (also source #{seen[sid] + 1})"
                )
            else:
                seen[sid] = i
        try:
            sources.append(Source.model_validate(entry))
        except ValidationError as e:
            for err in e.errors():
                field, msg = _describe(err)
                problems.append(f"{path}: {label}: {field}: {msg}")
    if problems:
        raise SourcesError(path, problems)
    return SourcesFile(path=path, sources=sources)


def text_line(data: bytes, offset: int) -> int:
    """The 1-based line of byte ``offset``."""
    return data.count(b"\n", 0, offset) + 1


def load_sources(path: str | Path) -> SourcesFile:
    """Read and validate a sources file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SourcesError(str(p), [f"{p}: cannot read: {e.strerror}"]) from None
    except UnicodeDecodeError as e:
        line = text_line(p.read_bytes(), e.start)
        raise SourcesError(str(p), [f"{p}: line {line}: not UTF-8 text (byte "
                                    f"0x{e.object[e.start]:02x} at offset {e.start})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SourcesError(str(p), [f"{p}: not valid YAML: {e}"]) from None
    return parse_sources(data, str(p))


def snapshot_source_ids(path: str | Path) -> list[str]:
    """Sources whose staged pages are kept past retention (none when there is no file)."""
    return [s.id for s in load_sources(path).sources if s.snapshots] if Path(path).exists() else []


def write_extract(path: str | Path, source_id: str, block: dict[str, Any]) -> SourcesFile:
    """Replace source ``source_id``'s ``extract:`` block in the sources file at ``path``,
    the rest of the file (comments, order, other sources) as it was; the file is replaced
    at once (a reader sees the old one or the new one) and only if the new one is valid
    (else :class:`SourcesError`, the file untouched). Returns the file as parsed now."""
    from ruamel.yaml import YAML

    p = Path(path)
    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 100
    doc = rt.load(p.read_text(encoding="utf-8"))
    entries = doc.get("sources") if isinstance(doc, dict) else doc
    entry = next((e for e in entries or [] if isinstance(e, dict) and e.get("id") == source_id),
                 None)
    if entry is None:
        raise SourcesError(str(p), [f"{p}: no source {source_id!r}"])
    entry["extract"] = block
    out = io.StringIO()
    rt.dump(doc, out)
    text = out.getvalue()
    parsed = parse_sources(yaml.safe_load(text), str(p))
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, p)
    return parsed
