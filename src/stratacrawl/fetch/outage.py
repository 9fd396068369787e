"""A tier outage as one crawl process sees it.

When Redis or PostgreSQL stops answering, the fetch worker's batches give their unfetched
tasks back (no attempt spent) and the worker stops claiming; it then probes the tier that
failed, backing off from half a second to five, and resumes at the first answer — the
clients reconnect to the same address by themselves. An outage longer than the limit
stops the crawl with :class:`~stratacrawl.errors.TierOutage` (one line, exit 3).

A PostgreSQL pool that had no connection free for its whole timeout (``PoolTimeout``:
every connection lent out, as when hundreds of batches start at once) is not taken for an
outage: the worker pauses claims the same way, but first asks the server on a connection
of its own; when it answers, the pause ends at once and is logged as a full pool, not as
PostgreSQL away.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from psycopg_pool import PoolTimeout

from stratacrawl.errors import TierOutage
from stratacrawl.tier_errors import tier_of

log = logging.getLogger(__name__)
FIRST_PROBE_S = 0.5
MAX_PROBE_S = 5.0


class Outage:
    """Whether the tiers answered lately; ``probes`` (per tier name) raise when the tier
    is still away; ``server_probe`` raises when PostgreSQL does not answer on a
    connection outside the pool."""

    def __init__(self, *, limit_s: float,
                 probes: dict[str, Callable[[], Awaitable[object]]],
                 server_probe: Callable[[], Awaitable[object]] | None = None) -> None:
        self.limit_s = limit_s
        self.probes = probes
        self.server_probe = server_probe
        self.tier: str | None = None      # the tier away now (None: all answer)
        self.reason = ""
        self.since = 0.0
        self.outages = 0                  # how many this process rode out
        self.pool_full = 0                # pauses for a full pool, PostgreSQL answering
        self._wait = FIRST_PROBE_S
        self._pool_full = False           # this pause began with a full pool

    @property
    def down(self) -> bool:
        return self.tier is not None

    def failed(self, exc: BaseException) -> None:
        """A call to a tier failed with one of ``TIER_DOWN``."""
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # a full pool, or PostgreSQL away: the server probe tells before anything is said
        self._pause(tier_of(exc), reason,
                    pool_full=isinstance(exc, PoolTimeout) and self.server_probe is not None)

    def away(self, tier: str, reason: str) -> None:
        """``tier`` is not answering (``reason``); an outage under way goes on as it was."""
        self._pause(tier, reason, pool_full=False)

    def _pause(self, tier: str, reason: str, *, pool_full: bool) -> None:
        if self.tier is None:
            self.tier, self.since, self._wait = tier, time.monotonic(), FIRST_PROBE_S
            self.reason, self._pool_full = reason, pool_full
            if not pool_full:
                self._announce()

    def _announce(self) -> None:
        self.outages += 1
        log.warning("crawl: %s is not answering (%s); claims paused, waiting up to %.0f s",
                    self.tier, self.reason, self.limit_s)

    async def recovered(self) -> bool:
        """Probe the tier that failed: True (and the outage over) when it answers; else
        wait the next backoff step, and past the limit raise :class:`TierOutage`."""
        if self.tier is None:
            return True
        if self._pool_full:
            return await self._after_full_pool()
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

    async def _after_full_pool(self) -> bool:
        """The pause began with a full pool: over at once if the server answers on a
        connection of its own, else an outage like any other from here."""
        assert self.server_probe is not None   # set whenever a full pool starts a pause
        self._pool_full = False
        try:
            await self.server_probe()
        except Exception:
            self._announce()
            return await self.recovered()
        self.pool_full += 1
        log.info("crawl: no PostgreSQL connection was free in the pool (%s); PostgreSQL "
                 "answers, claims resume", self.reason)
        self.tier = None
        return True
