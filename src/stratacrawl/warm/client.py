"""The Elasticsearch client of the warm tier.

Real Elasticsearch 8.x/9.x clusters get the client's defaults. The embedded
Elasticsearch-API server (osmem) answers 406 to the client's compatibility media
type (``application/vnd.elasticsearch+json; compatible-with=N``), so for it the
node class rewrites those headers to plain ``application/json`` — one setting,
``plain_json``, and nothing else about the client changes.
"""

from __future__ import annotations

import re
from typing import Any

from elastic_transport import AiohttpHttpNode
from elasticsearch import AsyncElasticsearch
from elasticsearch.serializer import OrjsonSerializer

from stratacrawl.errors import ConfigError

_COMPAT = re.compile(r"application/vnd\.elasticsearch\+([a-z\-]+)\s*;\s*compatible-with=\d+")


def _plain(headers: Any) -> Any:
    if not headers:
        return headers
    out = headers.copy()
    for key in ("accept", "content-type"):
        value = out.get(key)
        if value:
            out[key] = _COMPAT.sub(r"application/\1", value)
    return out


class PlainJsonNode(AiohttpHttpNode):
    """An aiohttp node that sends plain JSON media types instead of compatibility ones."""

    async def perform_request(  # type: ignore[override]
            self, method: str, target: str, body: bytes | None = None,
                              headers: Any = None, request_timeout: Any = None) -> Any:
        kwargs: dict[str, Any] = {"body": body, "headers": _plain(headers)}
        if request_timeout is not None:
            kwargs["request_timeout"] = request_timeout
        return await super().perform_request(method, target, **kwargs)


def check_url(url: str) -> None:
    """A :class:`ConfigError` when ``url`` is no http(s) URL with a host (the client would
    fail later, with a traceback of its own)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("expected http(s)://host[:port]")


def make_client(url: str, *, plain_json: bool, request_timeout: float = 30.0,
                **kwargs: Any) -> AsyncElasticsearch:
    """An async client for ``url``. Create it inside the event loop that uses it.

    JSON goes through orjson: demotion encodes two documents per crawled URL and decodes
    a bulk answer per item, and with the standard library that was ~10 % of the event loop
    of the worker demoting (py-spy, load test)."""
    if plain_json:
        kwargs["node_class"] = PlainJsonNode
    kwargs.setdefault("serializer", OrjsonSerializer())
    return AsyncElasticsearch(url, request_timeout=request_timeout, **kwargs)
