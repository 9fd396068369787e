"""A tier outage as one crawl process sees it.

When Redis or PostgreSQL stops answering, the fetch worker's batches give their unfetched
tasks back (no attempt spent) and the worker stops claiming; it then probes the tier that
failed, backing off from half a second to five, and resumes at the first answer — the
clients reconnect to the same address by themselves. An outage longer than the limit
stops the crawl with :class:`~stratacrawl.errors.TierOutage` (one line, exit 3).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from stratacrawl.errors import TierOutage
from stratacrawl.tier_errors import tier_of

log = logging.getLogger(__name__)
FIRST_PROBE_S = 0.5
MAX_PROBE_S = 5.0


class Outage:
    """Whether the tiers answered lately; ``probes`` (per tier name) raise when the tier
    is still away."""

    def __init__(self, *, limit_s: float,
                 probes: dict[str, Callable[[], Awaitable[object]]]) -> None:
        self.limit_s = limit_s
        self.probes = probes
        self.tier: str | None = None      # the tier away now (None: all answer)
        self.reason = ""
        self.since = 0.0
        self.outages = 0                  # how many this process rode out
        self._wait = FIRST_PROBE_S

    @property
    def down(self) -> bool:
        return self.tier is not None

    def failed(self, exc: BaseException) -> None:
        """A call to a tier failed with one of ``TIER_DOWN``."""
        self.away(tier_of(exc), str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def away(self, tier: str, reason: str) -> None:
        """``tier`` is not answering (``reason``); an outage under way goes on as it was."""
        if self.tier is None:
            self.tier, self.since, self._wait = tier, time.monotonic(), FIRST_PROBE_S
            self.reason = reason
            self.outages += 1
            log.warning("crawl: %s is not answering (%s); claims paused, waiting up to %.0f s",
                        self.tier, self.reason, self.limit_s)

    async def recovered(self) -> bool:
        """Probe the tier that failed: True (and the outage over) when it answers; else
        wait the next backoff step, and past the limit raise :class:`TierOutage`."""
        if self.tier is None:
            return True
        probe = self.probes.get(self.tier)
        try:
            if probe is not None:
                await probe()
        except Exception as e:
            away = time.monotonic() - self.since
            if away > self.limit_s:
                raise TierOutage(self.tier, None, f"not answering for {away:.0f} s "
                                 f"(STRATACRAWL_TIER_OUTAGE_S={self.limit_s:g}): "
                                 f"{self.reason}") from e
            await asyncio.sleep(self._wait)
            self._wait = min(self._wait * 2, MAX_PROBE_S)
            return False
        log.warning("crawl: %s answers again after %.1f s; claiming resumes", self.tier,
                    time.monotonic() - self.since)
        self.tier = None
        return True
