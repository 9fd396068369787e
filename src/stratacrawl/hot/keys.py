"""Every Redis key Stratacrawl uses, one function each: the one place to read the layout.

Hash tags (the ``{…}`` part) decide a key's Redis Cluster slot. Keys a script or a
multi-key command touches together share one: a source's keys carry ``{<source>}`` (its
ready and leased queues, pace, throttle, slots, cookies, trace, backlog samples), so
claims, pacing and slots are one-slot scripts; a Bloom filter shard carries
``{<name>:<shard>}``, spreading a filter over nodes. URL state (``sc:u:<fp>``) has no
tag: it spreads over every slot and is written one script call per slot.
"""

from __future__ import annotations


def _source(source_id: str, name: str) -> str:
    return f"sc:{{{source_id}}}:{name}"


# -- per source (one slot each) -----------------------------------------------------------
def ready(source_id: str) -> str:
    """Sorted set of task ids due, scored by priority band and due time."""
    return _source(source_id, "ready")


def leased(source_id: str) -> str:
    """Sorted set of task ids popped from ``ready``, scored by lease expiry."""
    return _source(source_id, "leased")


def pace(source_id: str) -> str:
    """The source's next free send time (shared pacing clock)."""
    return _source(source_id, "pace")


def throttle(source_id: str) -> str:
    """Hash: the factor 429s put on the rate, its last change, the Retry-After hold."""
    return _source(source_id, "throttle")


def slots(source_id: str) -> str:
    """Sorted set of concurrency-slot holders, scored by expiry."""
    return _source(source_id, "slots")


def cookies(source_id: str) -> str:
    """The source's session cookies (JSON, with a TTL)."""
    return _source(source_id, "cookies")


def trace(source_id: str) -> str:
    """List of the source's last requests."""
    return _source(source_id, "trace")


def backlog(source_id: str) -> str:
    """Sorted set of backlog samples (the P3 "growing steadily" rule)."""
    return _source(source_id, "backlog")


def url_rules(source_id: str) -> str:
    """JSON list of the source's active URL equivalence rules (a cache of cold's)."""
    return _source(source_id, "url_rules")


def cleaned_window(source_id: str) -> str:
    """List of the source's pages cleaned last (newest first): what the minute-level
    integrity check looks at (``r:<item URL hash>``, ``e:<fetched at>|<staging id>``)."""
    return _source(source_id, "cleaned")


def recrawl_budget(source_id: str, day: str) -> str:
    """Re-fetches the source asked for on a UTC day (``YYYY-MM-DD``), against its budget."""
    return _source(source_id, f"recrawl:{day}")


def minute_counters(source_id: str, minute: int) -> str:
    """Hash of one minute's live counters of a source."""
    return f"sc:m:{{{source_id}}}:{minute}"


def parse_cache(source_id: str, rules: str, content: str) -> str:
    """A cached parse result: the source, a digest of its rules, a digest of the page."""
    return f"sc:pc:{{{source_id}}}:{rules}:{content}"


# -- Bloom filter (a slot per shard) --------------------------------------------------------
def bloom_shard(name: str, shard: int) -> str:
    return f"sc:bloom:{{{name}:{shard}}}"


def bloom_ready(name: str) -> str:
    """Set once the filter holds every URL cold knows (rebuilt after a flush)."""
    return f"sc:bloom:{{{name}:0}}:ready"


# -- URL state (spread over every slot) -----------------------------------------------------
URL_STATE_PREFIX = "sc:u:"


def url_state(fingerprint: str) -> str:
    return URL_STATE_PREFIX + fingerprint


# -- process-wide ---------------------------------------------------------------------------
WORKERS = "sc:workers"                # hash: run id -> heartbeat (depth, latency)
ALERTS_PENDING = "sc:alerts:pending"  # hash: alert conditions held so far


def robots(origin: str) -> str:
    """robots.txt text of an origin (shared by every source on it)."""
    return f"sc:robots:{origin}"
