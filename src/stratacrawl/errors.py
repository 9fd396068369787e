"""The exception tree of Stratacrawl.

    StratacrawlError
    ├── ConfigError                 bad settings or sources file (terminal)
    │   └── SourcesError            carries every problem found, each with file/source/field
    ├── ServiceError                a tier cannot be reached or started
    │   ├── ServiceUnavailable      (transient) connection refused / timed out
    │   └── ServiceStartError       an embedded server failed to start
    ├── InvalidURL                  a URL that cannot be crawled (terminal)
    ├── FetchError                  classified once, in the fetcher
    │   ├── TransientFetchError     timeouts, resets, 5xx: retried at level 1
    │   └── TerminalFetchError      4xx, too large, wrong type: never retried
    ├── FormatError                 a page that does not fit its extraction rules (terminal)
    ├── ValidationFailed            a data-quality check failed (terminal)
    └── InUse                       what a command needs is another run's now (transient)

``Transient`` and ``Terminal`` are mixins so callers can catch by retry policy
across families.

The drivers' own errors that mean one of our tiers did not answer are listed once, in
:mod:`stratacrawl.tier_errors` (kept apart: importing the drivers costs a command's start
time): a fetch or landing that failed with one of them is not the page's fault, and
costs the task no attempt.
"""

from __future__ import annotations

from typing import Any

CLIP = 80


def clip(text: str, limit: int = CLIP) -> str:
    """User input as a message quotes it: at most ``limit`` characters, the middle cut
    with "…" (a 10,000-character id is not echoed whole in an error line)."""
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: keep - keep // 3] + "…" + text[len(text) - keep // 3:]


class StratacrawlError(Exception):
    """Base of every error Stratacrawl raises on purpose."""


class Transient:
    """Mixin: trying again later may succeed."""


class Terminal:
    """Mixin: trying again will fail the same way."""


class ConfigError(StratacrawlError, Terminal):
    """Configuration is invalid."""


class SourcesError(ConfigError):
    """A sources file has problems; ``problems`` lists each one."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(f"{path}: {len(problems)} problem(s)\n  " + "\n  ".join(problems))


class ServiceError(StratacrawlError):
    """A tier (Redis, Elasticsearch, PostgreSQL, Prefect) is not usable."""

    def __init__(self, service: str, url: str | None, reason: str) -> None:
        self.service = service
        self.url = url
        self.reason = reason
        where = f" at {url}" if url else ""
        super().__init__(f"{service}{where}: {reason}")


class ServiceUnavailable(ServiceError, Transient):
    """The server did not answer."""


class ServiceStartError(ServiceError, Terminal):
    """An embedded server could not be started."""


class InUse(StratacrawlError, Transient):
    """Another run holds what this one needs (the scratch tiers of a load test)."""


class InvalidURL(StratacrawlError, ValueError, Terminal):
    """A URL that cannot be parsed or must not be crawled; ``reason`` is a short code."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        shown = url if len(url) <= 200 else url[:200] + "..."
        super().__init__(f"invalid URL ({reason}): {shown!r}")


class FetchError(StratacrawlError):
    """A fetch did not produce a usable response."""

    def __init__(
        self,
        message: str,
        *,
        url: str,
        source_id: str | None = None,
        status_code: int | None = None,
        kind: str = "error",
    ) -> None:
        self.url = url
        self.source_id = source_id
        self.status_code = status_code
        self.kind = kind
        super().__init__(message)


class TransientFetchError(FetchError, Transient):
    """Timeouts, connection resets, 5xx."""


class TerminalFetchError(FetchError, Terminal):
    """4xx (but 408/429), oversized, wrong content type, robots-disallowed."""


class FormatError(StratacrawlError, Terminal):
    """A page answered but its content does not fit the source's extraction rules (the
    redesign that still answers 200). Not retried; the page stays staged for re-cleaning."""

    def __init__(self, reason: str, *, url: str = "", missing: list[str] | None = None,
                 fields: dict[str, Any] | None = None) -> None:
        self.reason = reason
        self.url = url
        self.missing = missing or []
        self.fields = fields    # what the rules did find (a page missing a required field)
        super().__init__(reason)


class ValidationFailed(StratacrawlError, Terminal):
    """A data-quality check failed; ``failures`` names each failed check."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        super().__init__("validation failed: " + "; ".join(failures))


class TierOutage(ServiceUnavailable):
    """A tier stayed away longer than a crawl waits for it (``STRATACRAWL_TIER_OUTAGE_S``)."""


# ``last_error`` of tasks that an older version ended FAILED because a tier did not answer (the
# fetcher named unknown exceptions by their type): compensation and recovery re-queue them.
TIER_ERROR_NAMES = ("ConnectionError", "TimeoutError", "BusyLoadingError", "TryAgainError",
                    "OperationalError", "InterfaceError", "PoolTimeout", "ConnectionTimeout",
                    "tier-unavailable")
