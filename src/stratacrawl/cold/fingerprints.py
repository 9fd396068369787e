"""URL and content fingerprints in PostgreSQL: stored as ``uuid``, seen as 32-character hex.

A fingerprint is 128 bits (blake2b, ``urls.fingerprint``), written everywhere else — Redis
keys, Elasticsearch ids, logs — as 32 hexadecimal characters. Cold stores it as ``uuid``:
16 bytes in a row and in an index entry instead of 33 as ``text``, which took ~80 bytes
off each known URL (its row, its primary key, its task's key). The program never sees a
``uuid``: these adapters, registered on psycopg's global adapters when ``cold.pool`` is
imported (the tiers' code reaches cold through it), load a ``uuid`` as the hex string and
dump a hex string where a binary COPY expects a ``uuid``. A parameter compared with a
fingerprint column is cast in SQL (``%b::uuid[]``) when it is sent in binary; sent as
text (``%s``), PostgreSQL reads the hex itself.
"""

from __future__ import annotations

import psycopg
from psycopg.adapt import Buffer, Dumper, Loader
from psycopg.pq import Format

UUID_OID = 2950


class HexLoader(Loader):
    def load(self, data: Buffer) -> str:
        return bytes(data).decode().replace("-", "")


class HexBinaryLoader(Loader):
    format = Format.BINARY

    def load(self, data: Buffer) -> str:
        return bytes(data).hex()


class HexBinaryDumper(Dumper):
    """A hex string into a ``uuid`` column of a binary COPY (``set_types``)."""

    format = Format.BINARY
    oid = UUID_OID

    def dump(self, obj: str) -> bytes:
        return bytes.fromhex(obj)


def register(adapters: psycopg.adapt.AdaptersMap = psycopg.adapters) -> None:
    adapters.register_loader("uuid", HexLoader)
    adapters.register_loader("uuid", HexBinaryLoader)
    adapters.register_dumper(None, HexBinaryDumper)
