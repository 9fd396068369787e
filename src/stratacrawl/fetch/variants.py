"""Variants held back until their URL rule is known.

A site often links one page under several URLs: a tracking parameter on a list page, a
trailing ``index.html``, while its sitemap names the plain URL. A learned URL rule
(``stratacrawl.urls.equivalence``) makes such a variant ``REDUNDANT`` once the rule is
active — but a rule turns active only after its confirming pairs were fetched, and until
then every variant was fetched too: on sites that link an item's variant from the list
and its plain URL from the sitemap, ~10 % of the items were fetched twice.

So a claimed item whose plainer form (``siblings``: without its query or a parameter, its
trailing slash, the case of its path) is a task of the same source, of the same kind and not
failed, is a *variant*, and the rules that would merge the two (``explain``) decide:

- any of them revoked, or forbidden by the source: the two are different pages — fetched;
- all active: the redundant-variant check before this one has set it aside (or it is one
  of the few kept as verification fetches) — fetched;
- otherwise the rules are undecided: the first ``EVIDENCE_FETCHES`` variants of those rules
  in ``EVIDENCE_WINDOW_S`` are fetched (each is a pair the miner needs: the variant
  declares its plain URL canonical, or serves its content), the rest are given back,
  their attempt refunded, due ``HOLD_S`` later — or at once when a rule of the source is
  decided (``cold/url_rules.save_rules``), or when the worker has nothing else to fetch
  (:meth:`VariantHold.release`: a hold defers work, it never keeps a crawl waiting; it
  first runs a mining pass over the pages fetched so far, so a rule their evidence
  decides sets them aside instead of their being fetched). Then the variant ends
  ``REDUNDANT`` unfetched (its rule active) or is fetched.

A source that does not learn rules (``url_rules: {learn: false}``) holds nothing. Nothing
only a variant reaches is lost: a variant held for ``MAX_HOLD_S`` in all (its plain
URL failing, a rule the evidence never decides) is fetched like any task, and a held task
is due within the crawl's idle horizon, so ``--until-idle`` waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from stratacrawl.cold.tasks import ClaimedTask
from stratacrawl.cold.url_rules import HELD_PREFIX, release_held
from stratacrawl.errors import InvalidURL
from stratacrawl.frontier.frontier import Frontier
from stratacrawl.frontier.url_rules import UrlRules
from stratacrawl.sources import Source
from stratacrawl.tier_errors import TIER_DOWN
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.urls.equivalence import MIN_SUPPORT, Rule, apply, explain, siblings

HOLD_S = 10.0            # a held variant is due again this much later
MAX_HOLD_S = 120.0       # ... and fetched all the same once held this long
EVIDENCE_FETCHES = MIN_SUPPORT   # variants of undecided rules fetched per window (one pair each)
EVIDENCE_WINDOW_S = 60.0
RELEASE_EVERY_S = 1.0    # an idle worker releases held variants this often at most
_GONE = ("FAILED", "REDUNDANT")      # a plain URL in these states reaches nothing


def canonical_urls(tasks: Sequence[ClaimedTask]) -> dict[int, str]:
    """The canonical URL of each task, by task id (a URL that has none is left out): the
    redundant check and the hold both read it, and it is worked out once."""
    out = {}
    for t in tasks:
        try:
            out[t.id] = canonicalize(t.url)
        except InvalidURL:
            continue
    return out


class VariantHold:
    """Holds back the claimed variants whose URL rule is undecided (process ``run_id``'s
    claims), reading tasks from ``frontier`` and rule states from ``url_rules``."""

    def __init__(self, *, frontier: Frontier, url_rules: UrlRules, run_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.frontier = frontier
        self.url_rules = url_rules
        self.run_id = run_id
        self.clock = clock
        self._first_held: dict[int, float] = {}   # task id → when it was first held here
        self._holding: set[str] = set()   # the sources of the tasks in ``_first_held``
        # (source, rules) → when their evidence fetches were let through, in the window
        self._evidence: dict[tuple[str, frozenset[Rule]], list[float]] = {}
        self._release_at = 0.0
        self._released: set[int] = set()   # held here, then released: fetched when claimed

    async def __call__(self, source: Source, tasks: Sequence[ClaimedTask],
                       pinned: Sequence[Rule], learned: Sequence[Rule],
                       canonical: Mapping[int, str]) -> list[ClaimedTask]:
        """The tasks to fetch now (``canonical``: their canonical URLs by task id, as
        :func:`canonical_urls` gives them); the others are given back, due later."""
        if not source.url_rules.learn:
            return list(tasks)   # no rule will be decided: every variant is fetched
        plain = self._plain_forms(tasks, pinned, learned, canonical)
        if not plain:
            return list(tasks)
        states = await self.frontier.ledger.states(
            source.id, sorted({fp for _, forms in plain.values() for _, fp in forms}))
        if not states:
            return list(tasks)
        rule_states = await self.url_rules.states(source.id)
        forbidden = set(source.url_rules.forbidden)
        now = self.clock()
        held: dict[int, str] = {}
        for t in tasks:
            task_url, forms = plain.get(t.id, ("", []))
            for url, fp in forms:
                known = states.get(fp)
                if known is None or known[0] != t.kind or known[1] in _GONE:
                    continue
                rules = explain(task_url, url)
                if not rules or apply(rules, task_url) != url or any(
                        r in forbidden or rule_states.get(r) == "revoked" for r in rules):
                    continue
                if t.id in self._released or all(rule_states.get(r) == "active"
                                                  for r in rules):
                    self._released.discard(t.id)
                    break
                if self._let_through(source.id, rules, now) or self._held_long(t.id, now):
                    break
                held[t.id] = url
                break
        self._forget(now)
        if not held:
            return list(tasks)
        self._holding.add(source.id)
        await self.frontier.ledger.hold_back(
            {i: HELD_PREFIX + url for i, url in held.items()}, self.run_id,
            datetime.now(UTC) + timedelta(seconds=HOLD_S))
        await self.frontier.finished(source.id, list(held), self.run_id)
        return [t for t in tasks if t.id not in held]

    async def release(self, sources: Sequence[Source]) -> set[str]:
        """Nothing else to fetch here: the sources' held variants are due now (a hold
        defers work while there is other work, it never keeps a crawl waiting). First a
        mining pass over what the sources that hold variants here fetched: a rule it
        decides makes their variants due itself, and claimed again they are set aside as
        redundant, not fetched. Looked at once in ``RELEASE_EVERY_S`` at most; returns the
        sources that had any held."""
        now = self.clock()
        if now < self._release_at or not self._first_held:
            return set()   # (nothing held here: other processes release their own)
        self._release_at = now + RELEASE_EVERY_S
        decided = set()   # a rule turned active: its source's held variants are due now
        for source in sources:
            if source.id in self._holding and await self.url_rules.learn(source, force=True):
                decided.add(source.id)
        self._holding.clear()
        try:
            released = decided | await release_held(self.frontier.ledger.pool,
                                                    [s.id for s in sources])
        except TIER_DOWN:   # the loop's next claim meets the outage and says so
            return decided
        # claimed again, they are fetched (whatever their rules' state), not held again
        if len(self._released) > 10_000:
            self._released.clear()
        self._released.update(self._first_held)
        self._first_held.clear()
        return released

    def _plain_forms(self, tasks: Sequence[ClaimedTask], pinned: Sequence[Rule],
                     learned: Sequence[Rule], canonical_of: Mapping[int, str]
                     ) -> dict[int, tuple[str, list[tuple[str, str]]]]:
        """Per item task that has plainer forms: its canonical URL, and each form with the
        fingerprint a task of it has (the form under the source's rules, as discovery
        queues it)."""
        out: dict[int, tuple[str, list[tuple[str, str]]]] = {}
        rules = (*pinned, *learned)
        for t in tasks:
            canonical = canonical_of.get(t.id)
            if t.kind != "item" or canonical is None:
                continue
            forms = [(url, canonical_fingerprint(apply(rules, url) if rules else url))
                     for url in siblings(canonical)]
            forms = [(url, fp) for url, fp in forms if fp != t.url_hash]
            if forms:
                out[t.id] = (canonical, forms)
        return out

    def _let_through(self, source_id: str, rules: frozenset[Rule], now: float) -> bool:
        """Whether one more variant of these undecided rules is fetched as evidence."""
        times = self._evidence.setdefault((source_id, rules), [])
        times[:] = [t for t in times if now - t < EVIDENCE_WINDOW_S]
        if len(times) >= EVIDENCE_FETCHES:
            return False
        times.append(now)
        return True

    def _held_long(self, task_id: int, now: float) -> bool:
        """Whether this task was held for ``MAX_HOLD_S`` already (it is fetched now)."""
        first = self._first_held.setdefault(task_id, now)
        if now - first < MAX_HOLD_S:
            return False
        del self._first_held[task_id]
        return True

    def _forget(self, now: float) -> None:
        """Hold times of tasks not held again for long (set aside, fetched elsewhere), and
        evidence windows long past."""
        if len(self._first_held) > 1_000:
            self._first_held = {i: t for i, t in self._first_held.items()
                                if now - t < 2 * MAX_HOLD_S}
        if len(self._evidence) > 1_000:
            self._evidence = {k: times for k, times in self._evidence.items()
                              if times and now - times[-1] < EVIDENCE_WINDOW_S}
