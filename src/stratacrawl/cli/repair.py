"""``stratacrawl repair SOURCE``: a proposal of new extraction rules for a source whose
site changed layout (see ``stratacrawl.repair.propose``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from stratacrawl.cli.common import (
    EXIT_FAILED,
    JSON,
    SOURCES,
    console,
    emit_json,
    fail,
    load_sources_file,
    run,
    settings,
)

if TYPE_CHECKING:   # the engines are imported by the command that runs them
    from stratacrawl.repair.propose import Proposal


def repair_cmd(
        source: str = typer.Argument(..., help="The source whose rules to repair."),
        sources: Path | None = SOURCES,
        sample: int = typer.Option(12, "--sample", min=2, max=100,
                                   help="Items whose values are known, fetched again."),
        as_json: bool = JSON,
) -> None:
    """Propose rules for the fields a source's rules no longer find: its known items are
    fetched again (a small sample, politely, at urgent priority), and rules are learned
    from the pages as they are now and the values their records hold, then checked on
    pairs held back. Prints per field the rule before and after with its held-back
    precision and recall, and before/after values of sample pages; exits 1 when a broken
    field has no rule that explains the pairs. Changes nothing."""
    from stratacrawl.repair.propose import RepairError, propose
    from stratacrawl.wiring import open_app

    parsed = load_sources_file(sources, source)

    async def main() -> Proposal:
        async with open_app(settings()) as comps:
            try:
                return await propose(comps, parsed, parsed.get(source), sample)
            except RepairError as e:
                fail(str(e))

    proposal = run(main())
    if as_json:
        emit_json(proposal.as_dict())
    else:
        console.print(f"{proposal.source}: {proposal.pairs} page(s) fetched again, paired "
                      "with their records", highlight=False)
        for f in proposal.fields.values():
            if f.kept:
                console.print(f"  {f.name}: unchanged {f.before}", highlight=False, markup=False)
            elif f.after is None:
                console.print(f"  {f.name}: NO RULE — " + "; ".join(f.disagree),
                              highlight=False, markup=False)
            else:
                console.print(f"  {f.name}: {f.before} -> {f.after} (held back: precision "
                              f"{f.precision}, recall {f.recall})", highlight=False,
                              markup=False)
        for s in proposal.samples:
            console.print(f"  {s['url']}: before {s['before']} after {s['after']}",
                          highlight=False, markup=False)
    if not proposal.complete:
        raise typer.Exit(EXIT_FAILED)
