"""Deciding on a repair proposal, and rolling a source's rules back.

**Approval** writes the proposal's ``extract`` block into the sources file (the rest of
the file as it was; ``sources.write_extract``) and records it as the source's next
version (the block it replaced is recorded first, as version 1, when the source has none
yet); then the pages the old rules failed on — the source's format errors, which are the
pages staged since the redesign — are re-cleaned from staging under the new rules (no
fetch), the days they belong to validated again, and the source's ``integrity`` and
``format_anomaly`` alerts resolved with a note naming the repair. **Rejection** only
records the decision. **Rollback** writes an earlier version's block back (a new version
itself, so it can be rolled forward again) and re-cleans the same way. Nothing is
written without one of these three.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from stratacrawl.clean.anomaly import FORMAT_ANOMALY
from stratacrawl.cold import repairs
from stratacrawl.cold.alerts import resolve_alerts
from stratacrawl.cold.staging import format_error_days
from stratacrawl.sources import SourcesFile, write_extract
from stratacrawl.validate.integrity import INTEGRITY
from stratacrawl.wiring import Components


class DecisionError(Exception):
    """No open proposal to decide on, or no such version: the message says which."""


@dataclass
class Applied:
    source: str
    version: int
    recleaned: int = 0                   # pages re-cleaned under the new rules
    records: int = 0                     # records they wrote (new or updated)
    format_errors: int = 0               # pages that still do not fit
    days: list[date] = field(default_factory=list)
    validation: dict[str, bool] = field(default_factory=dict)    # day → passed
    resolved: int = 0                    # alerts resolved


async def _write_version(comps: Components, path: Path, sources: SourcesFile, source_id: str,
                         block: dict[str, Any], reason: str) -> tuple[SourcesFile, int]:
    if not await repairs.versions(comps.pool, source_id):   # the block before any repair,
        await repairs.add_version(comps.pool, source_id,   # as the file has it
                                  _written_block(path, sources, source_id),
                                  "before the first repair")
    updated = write_extract(path, source_id, block)
    return updated, await repairs.add_version(comps.pool, source_id, block, reason)


def _written_block(path: Path, sources: SourcesFile, source_id: str) -> dict[str, Any]:
    """The source's ``extract:`` block as the sources file spells it (a rollback writes
    back what the operator wrote, defaults left out as they were)."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    for entry in (doc.get("sources") if isinstance(doc, dict) else doc) or []:
        if isinstance(entry, dict) and entry.get("id") == source_id \
                and isinstance(entry.get("extract"), dict):
            return dict(entry["extract"])
    return sources.get(source_id).extract.model_dump(exclude_none=True)


async def _reclean(comps: Components, sources: SourcesFile, source_id: str,
                   applied: Applied, note: str) -> Applied:
    """The source's format errors re-cleaned under ``sources``' rules, their days
    validated, its layout alerts resolved with ``note``."""
    applied.days = await format_error_days(comps.pool, source_id)
    cleaner = comps.cleaner(sources)
    for day in applied.days:
        applied.recleaned += await cleaner.reclean(source_id, day, failed_only=True)
    report = await comps.clean(sources, source_ids=[source_id])
    stats = report.stats.sources.get(source_id)
    if stats is not None:
        applied.records, applied.format_errors = stats.records, stats.format_errors
    if applied.days:
        for r in await comps.validator().validate([sources.get(source_id)], applied.days):
            applied.validation[r.day.isoformat()] = r.success
    for kind in (INTEGRITY, FORMAT_ANOMALY):
        applied.resolved += await resolve_alerts(comps.pool, kind=kind, source_id=source_id,
                                                 note=note)
    return applied


async def approve(comps: Components, path: Path, sources: SourcesFile, source_id: str, *,
                  by: str, comment: str = "", proposal_id: int | None = None) -> Applied:
    row = await repairs.proposal(comps.pool, source_id, proposal_id)
    if row is None or row.state != "proposed":
        raise DecisionError(f"{source_id}: no open repair proposal"
                            + (f" (the newest, {row.id}, is {row.state})" if row else "")
                            + ": run `stratacrawl repair " + source_id + "` first")
    reason = f"repair proposal {row.id} approved by {by}" + (f": {comment}" if comment else "")
    updated, version = await _write_version(comps, path, sources, source_id, row.extract,
                                            reason)
    if not await repairs.decide(comps.pool, row.id, "approved", by, comment, version):
        raise DecisionError(f"{source_id}: proposal {row.id} was decided meanwhile")
    return await _reclean(comps, updated, source_id, Applied(source_id, version),
                          f"rules repaired: version {version} ({reason})")


async def reject(comps: Components, source_id: str, *, by: str, comment: str = "",
                 proposal_id: int | None = None) -> int:
    row = await repairs.proposal(comps.pool, source_id, proposal_id)
    if row is None or not await repairs.decide(comps.pool, row.id, "rejected", by, comment):
        raise DecisionError(f"{source_id}: no open repair proposal")
    return row.id


async def rollback(comps: Components, path: Path, sources: SourcesFile, source_id: str,
                   version: int, *, by: str) -> Applied:
    known = {v.version: v for v in await repairs.versions(comps.pool, source_id)}
    if version not in known:
        raise DecisionError(f"{source_id}: no version {version} (versions: "
                            f"{', '.join(map(str, sorted(known))) or 'none yet'})")
    reason = f"rollback to version {version} by {by}"
    updated, new = await _write_version(comps, path, sources, source_id,
                                        known[version].extract, reason)
    return await _reclean(comps, updated, source_id, Applied(source_id, new),
                          f"rules rolled back: version {new} ({reason})")
