"""A repair proposal for one source: which of its fields its rules no longer find, the
rules learned for them from the pages as they are now, and how those rules do.

**Pairs.** The items whose values are known — the newest records holding every required
field — are fetched again now: a small sample (``SAMPLE``), queued urgent and fetched
politely through the source's own pacing. Each pair is the page as it is now and the
values its record holds: the record was written from the old layout, and a page that no
longer fits the rules never overwrote it.

**Which fields.** The source's rules are applied to the new pages: a field they still
find right on every pair keeps its rule; the others are learned from the pairs (the
learner holds each pair back once to measure the rule chosen without it). For an
``article`` source only its required fields that the article extraction lost are learned,
as field overrides.

The proposal says per field the rule before and after, the held-back precision and
recall, and for sample pages the values before (the record) and after (the new rules).
A complete proposal is recorded (``repair_proposals``) for a decision
(``repair/apply.py``); nothing else is changed by proposing.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stratacrawl.clean.extract import Page, extractor_for
from stratacrawl.clean.learn import Example, FieldResult, field_type, learn, same
from stratacrawl.cold import repairs
from stratacrawl.cold.records import known_good
from stratacrawl.cold.staging import fetched_since, newest_pages
from stratacrawl.cold.tasks import NewTask
from stratacrawl.crawl import crawl
from stratacrawl.sources import ArticleExtract, RulesExtract, Source, SourcesFile
from stratacrawl.urls import canonical_fingerprint, canonicalize
from stratacrawl.wiring import Components

SAMPLE = 12              # items fetched again
FETCH_S = 120.0          # how long the sample may take to fetch
SAMPLES_SHOWN = 3


class RepairError(Exception):
    """No proposal can be made (a source of another kind, no known items, nothing
    fetched): the message says which."""


@dataclass
class FieldProposal:
    name: str
    before: dict[str, Any] | None          # the rule in the sources file (None: none)
    after: dict[str, Any] | None           # the learned rule (None: none explains the pairs)
    precision: float | None = None
    recall: float | None = None
    kept: bool = False                     # the rule still finds it right: unchanged
    disagree: list[str] = field(default_factory=list)


AUTO_RECALL = 0.95       # ``repair: auto`` approves a proposal this good by itself


@dataclass
class Proposal:
    source: str
    pairs: int
    fields: dict[str, FieldProposal]
    samples: list[dict[str, Any]]          # {"url", "before": {...}, "after": {...}}
    id: int | None = None                  # as recorded (``repair_proposals``)

    @property
    def auto_approvable(self) -> bool:
        """Every learned rule was right on every pair held back and found ≥ 95 % of them."""
        learned = [f for f in self.fields.values() if not f.kept]
        return self.complete and bool(learned) and all(
            f.precision == 1.0 and (f.recall or 0.0) >= AUTO_RECALL for f in learned)

    @property
    def complete(self) -> bool:
        """Every broken field has a rule."""
        return all(f.kept or f.after is not None for f in self.fields.values())

    def extract_block(self, source: Source) -> dict[str, Any]:
        """The source's ``extract:`` block with the learned rules in place."""
        block = source.extract.model_dump(exclude_none=True)
        fields = dict(block.get("fields") or {})
        for f in self.fields.values():
            if not f.kept and f.after is not None:
                fields[f.name] = f.after
        block["fields"] = fields
        return block

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "pairs": self.pairs,
                "complete": self.complete, "auto_approvable": self.auto_approvable,
                "fields": {n: {"rule": f.after if not f.kept else f.before,
                               "before": f.before, "kept": f.kept, "precision": f.precision,
                               "recall": f.recall, "disagree": f.disagree}
                           for n, f in self.fields.items()},
                "samples": self.samples}


async def fetch_again(comps: Components, sources: SourcesFile, source: Source,
                      urls: list[str], timeout_s: float = FETCH_S
                      ) -> dict[str, tuple[str, str | None, bytes]]:
    """Fetch ``urls`` of ``source`` again now (urgent, through its pacing) and return the
    pages as they are now (URL → final URL, content type, body): the page each fetch
    staged, or for a 304 the page staged before it."""
    since = datetime.now(UTC)
    by_hash = {canonical_fingerprint(canonicalize(u)): u for u in urls}
    await comps.frontier.add([NewTask(source.id, u, fp) for fp, u in by_hash.items()],
                             on_conflict="urgent")
    stop = asyncio.Event()
    only = SourcesFile(path=sources.path, sources=[source])

    async def watch() -> None:   # ends the crawl once every URL was fetched
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(await fetched_since(comps.pool, source.id, list(by_hash),
                                       since)) >= len(by_hash):
                break
            await asyncio.sleep(1.0)
        stop.set()

    watcher = asyncio.ensure_future(watch())
    try:
        await crawl(comps, only, until_idle=False, seconds=timeout_s, flush_s=0.5, stop=stop)
    finally:
        stop.set()
        await watcher
    fetched = await fetched_since(comps.pool, source.id, list(by_hash), since)
    pages = await newest_pages(comps.pool, source.id, sorted(fetched))
    return {by_hash[fp]: page for fp, page in pages.items()}


def _rule_fields(source: Source) -> dict[str, dict[str, Any]]:
    return {n: r.model_dump(exclude_none=True)
            for n, r in getattr(source.extract, "fields", {}).items()}


async def propose(comps: Components, sources: SourcesFile, source: Source,
                  sample: int = SAMPLE) -> Proposal:
    if not isinstance(source.extract, RulesExtract | ArticleExtract):
        raise RepairError(f"{source.id}: a {source.extract.kind} source's fields are paths "
                          "into its JSON, not rules a page layout breaks")
    known = await known_good(comps.pool, source.id, source.required, sample)
    if len(known) < 2:
        raise RepairError(f"{source.id}: {len(known)} record(s) with every required field "
                          f"({', '.join(source.required) or 'none required'}): at least 2 "
                          "are needed to learn from")
    # by the item's canonical URL: the URL that reached it may be a variant a URL rule
    # now makes redundant (never fetched again)
    pages = await fetch_again(comps, sources, source, [canonical for canonical, _, _ in known])
    if len(pages) < 2:
        raise RepairError(f"{source.id}: {len(pages)} of {len(known)} pages fetched again "
                          f"within {FETCH_S:.0f} s: too few to learn from")
    extractor = extractor_for(source)
    pairs = []
    for canonical, _url, fields in known:
        if canonical not in pages:
            continue
        final, content_type, body = pages[canonical]
        found = extractor.extract(Page(final, content_type, body))
        pairs.append((Example(canonical, final, body, fields),
                      found[0].fields if found else {}))
    names = (list(_rule_fields(source)) if isinstance(source.extract, RulesExtract)
             else list(source.required))
    broken = [n for n in names
              if not all(same(field_type([ex.fields.get(n)]), now.get(n), ex.fields.get(n))
                         for ex, now in pairs if ex.fields.get(n) is not None)]
    examples = [Example(ex.page, ex.url, ex.html, {n: ex.fields[n] for n in broken
                                                   if ex.fields.get(n) is not None})
                for ex, _ in pairs]
    learned = learn([e for e in examples if e.fields]).fields if broken else {}
    before = _rule_fields(source)
    proposals: dict[str, FieldProposal] = {}
    for n in names:
        if n not in broken:
            proposals[n] = FieldProposal(n, before.get(n), before.get(n), kept=True)
            continue
        got: FieldResult | None = learned.get(n)
        rule = got.rule.model_dump(exclude_none=True) if got and got.rule else None
        proposals[n] = FieldProposal(n, before.get(n), rule,
                                     got.precision if got else None,
                                     got.recall if got else None,
                                     disagree=got.disagree if got else [])
    proposal = Proposal(source.id, len(pairs), proposals, [])
    if proposal.complete:
        repaired = source.model_copy(update={"extract": type(source.extract).model_validate(
            proposal.extract_block(source))})
        after = extractor_for(repaired)
        for ex, now in pairs[:SAMPLES_SHOWN]:
            found = after.extract(Page(ex.url, "text/html", ex.html))
            proposal.samples.append({"url": ex.page, "before": ex.fields, "now": now,
                                     "after": found[0].fields if found else {}})
        proposal.id = await repairs.save_proposal(comps.pool, source.id, proposal.as_dict(),
                                                  proposal.extract_block(source))
    return proposal
