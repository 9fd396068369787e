"""Simulated hosts for tests. Each simulated source listens on a loopback address of its
own (``build_specs``' ``first_host`` and the octets after it); a test takes a fresh block
here instead of writing a number, so no two tests of a session share a host — its robots
cache, cookies and connections — by accident."""

from __future__ import annotations

import itertools

BLOCK = 8   # hosts per block: more than any test's sources
_blocks = itertools.count()


def hosts() -> int:
    """The first host octet of a block of ``BLOCK`` hosts no other test of this session
    was given (``build_specs`` maps octets past 250 into 127.0.1.x and on)."""
    return 10 + BLOCK * next(_blocks)
