"""A page's schema.org data — JSON-LD and microdata, read by extruct — as plain objects,
and the ``Type.key.key`` paths that pick a value out of them (``jsonld`` and
``microdata`` field rules, and the rule learner's candidates).

Both syntaxes become the same shape: a list of objects with an ``@type`` (the type's
short name, ``Product`` for ``https://schema.org/Product``) and their properties, nested
objects alike; a JSON-LD ``@graph`` is flattened into the list. A path's first segment
names the type: the first object of that type (top level first, then nested, in document
order), then one key a segment; a list on the way takes its first element; a value
object (``{"@value": …}``) is its value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lxml.html import HtmlElement

Item = dict[str, Any]


def types_of(item: Item) -> list[str]:
    """The short names of an object's types."""
    return _short(item.get("@type"))


def _short(type_: Any) -> list[str]:
    types = type_ if isinstance(type_, list) else [type_]
    return [str(t).rstrip("/").rsplit("/", 1)[-1].rsplit("#", 1)[-1] for t in types if t]


def jsonld_items(document: HtmlElement) -> list[Item]:
    from extruct.jsonld import JsonLdExtractor

    out: list[Item] = []
    for item in JsonLdExtractor().extract_items(document):
        if isinstance(item, dict) and isinstance(item.get("@graph"), list):
            out += [i for i in item["@graph"] if isinstance(i, dict)]
        elif isinstance(item, dict):
            out.append(item)
    return out


def _from_microdata(item: dict[str, Any]) -> Item:
    out: Item = {"@type": _short(item.get("type"))}
    for key, value in (item.get("properties") or {}).items():
        out[key] = ([_from_microdata(v) if isinstance(v, dict) else v for v in value]
                    if isinstance(value, list)
                    else _from_microdata(value) if isinstance(value, dict) else value)
    return out


def microdata_items(document: HtmlElement, base_url: str) -> list[Item]:
    from extruct.w3cmicrodata import MicrodataExtractor

    return [_from_microdata(i) for i in MicrodataExtractor().extract_items(document, base_url)
            if isinstance(i, dict)]


def _objects(items: list[Any]) -> Iterator[Item]:
    """Every object, top level first, then nested ones (breadth first, document order)."""
    queue = [i for i in items if isinstance(i, dict)]
    while queue:
        item = queue.pop(0)
        yield item
        for value in item.values():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, dict):
                    queue.append(v)


def _scalar(value: Any) -> Any:
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    if isinstance(value, dict):
        return value.get("@value")
    return value


def pick(items: list[Item], path: str) -> Any:
    """The value at ``path`` (``Type.key.key``), or None."""
    type_, *keys = path.split(".")
    for obj in _objects(items):
        if type_ not in _short(obj.get("@type")):
            continue
        value: Any = obj
        for key in keys:
            while isinstance(value, list):
                value = value[0] if value else None
            value = value.get(key) if isinstance(value, dict) else None
        return _scalar(value)
    return None


def paths(items: list[Item]) -> Iterator[tuple[str, Any]]:
    """Every (path, scalar value) of the objects (the learner's candidates): from each
    object by its type, through nested objects, the first element of a list."""
    def walk(prefix: str, value: Any, depth: int) -> Iterator[tuple[str, Any]]:
        while isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, dict) and "@value" not in value:
            if depth > 4:
                return
            for key, v in value.items():
                if not key.startswith("@") or key == "@id":
                    yield from walk(f"{prefix}.{key}", v, depth + 1)
        elif value is not None:
            yield prefix, _scalar(value)

    seen: set[str] = set()
    for obj in _objects(items):
        for type_ in _short(obj.get("@type")):
            if type_ in seen:
                continue     # a path picks the first object of its type
            seen.add(type_)
            yield from walk(type_, obj, 0)
