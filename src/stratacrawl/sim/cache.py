"""The simulator's response cache: each page rendered once and kept, with its validators
and its compressed forms made on first request, in a byte-bounded LRU — so the steady
state of a crawl benchmark is a dict lookup and a socket write."""

from __future__ import annotations

import gzip
from collections import OrderedDict
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import brotli
from aiohttp import web

from stratacrawl.sim import render


class CachedPage:
    """A rendered page with its validators and, once asked for, its compressed forms."""

    __slots__ = ("_headers", "modified", "raw", "validators", "variants")

    def __init__(self, raw: bytes, ctype: str, modified: datetime | None) -> None:
        self.raw = raw
        self.modified = modified.replace(microsecond=0) if modified else None
        self.validators = {"ETag": render.etag_of(raw), "Vary": "Accept-Encoding",
                           "Cache-Control": "max-age=60"}
        if modified is not None:
            self.validators["Last-Modified"] = format_datetime(modified.astimezone(UTC),
                                                               usegmt=True)
        charset = "; charset=utf-8" if ctype.startswith("text/") else ""
        self._headers = {**self.validators, "Content-Type": ctype + charset}
        self.variants: dict[str, tuple[bytes, dict[str, str]]] = {
            "identity": (raw, self._headers)}

    @property
    def size(self) -> int:
        return sum(len(b) for b, _ in self.variants.values())

    def encoded(self, enc: str) -> tuple[bytes, dict[str, str]]:
        variant = self.variants.get(enc)
        if variant is None:
            packed = (brotli.compress(self.raw, quality=1) if enc == "br"
                      else gzip.compress(self.raw, compresslevel=1, mtime=0))
            variant = (packed, {**self._headers, "Content-Encoding": enc})
            self.variants[enc] = variant
        return variant

    def not_modified(self, request: web.Request) -> bool:
        inm = request.headers.get("If-None-Match")
        if inm is not None:
            return self.validators["ETag"] in {t.strip() for t in inm.split(",")} or (
                inm.strip() == "*")
        ims = request.headers.get("If-Modified-Since")
        if ims and self.modified is not None:
            try:
                return self.modified <= parsedate_to_datetime(ims)
            except (TypeError, ValueError):
                return False
        return False


class ResponseCache:
    """LRU of rendered pages, bounded by the bytes of the raw bodies."""

    def __init__(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._data: OrderedDict[tuple[Any, ...], CachedPage] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> CachedPage | None:
        page = self._data.get(key)
        if page is not None:
            self._data.move_to_end(key)
        return page

    def put(self, key: tuple[Any, ...], page: CachedPage) -> None:
        if key in self._data or len(page.raw) > self.max_bytes // 4:
            return
        self._data[key] = page
        self.bytes += len(page.raw)
        while self.bytes > self.max_bytes:
            _, old = self._data.popitem(last=False)
            self.bytes -= len(old.raw)
