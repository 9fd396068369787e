"""``stratacrawl repair SOURCE``: new extraction rules for a source whose site changed
layout — proposed, approved or rejected, looked back on and rolled back (see
``stratacrawl.repair``)."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from stratacrawl.cli.common import (
    EXIT_FAILED,
    JSON,
    SOURCES,
    bad_input,
    console,
    emit_json,
    fail,
    load_sources_file,
    run,
    settings,
    sources_path,
)

if TYPE_CHECKING:   # the engines are imported by the command that runs them
    from stratacrawl.repair.apply import Applied
    from stratacrawl.repair.propose import Proposal


def repair_cmd(
        source: str = typer.Argument(..., help="The source whose rules to repair."),
        sources: Path | None = SOURCES,
        sample: int = typer.Option(12, "--sample", min=2, max=100,
                                   help="Items whose values are known, fetched again."),
        approve: bool = typer.Option(False, "--approve", help=(
            "Approve the source's open proposal: write its rules into the sources file (a "
            "new version), re-clean the pages the old rules failed on, validate their days, "
            "resolve the layout alerts.")),
        reject: bool = typer.Option(False, "--reject", help="Reject the open proposal."),
        proposal_id: int | None = typer.Option(None, "--proposal",
                                               help="With --approve/--reject: this one."),
        comment: str = typer.Option("", "--comment", help="Why (kept with the decision)."),
        history: bool = typer.Option(False, "--history",
                                     help="The versions of the source's rules."),
        rollback: int | None = typer.Option(None, "--rollback", min=1, metavar="VERSION",
                                            help="Write that version's rules back."),
        as_json: bool = JSON,
) -> None:
    """Propose rules for the fields a source's rules no longer find: its known items are
    fetched again (a small sample, politely, at urgent priority), rules are learned from
    the pages as they are now and the values their records hold, and checked on pairs
    held back. Prints per field the rule before and after with its held-back precision
    and recall, and before/after values of sample pages; records the proposal for
    --approve or --reject (or the paused `repair` flow run's form in the Prefect UI);
    exits 1 when a broken field has no rule that explains the pairs. A source with
    `repair: auto` approves a proposal whose every rule was right on every pair held
    back (recall ≥ 0.95) by itself."""
    if sum((approve, reject, history, rollback is not None)) > 1:
        bad_input("give one of --approve, --reject, --history, --rollback")
    parsed = load_sources_file(sources, source)
    path = sources_path(sources)
    by = getpass.getuser()

    async def main() -> Any:
        from stratacrawl.cold import repairs
        from stratacrawl.repair.apply import DecisionError
        from stratacrawl.repair.apply import approve as approve_proposal
        from stratacrawl.repair.apply import reject as reject_proposal
        from stratacrawl.repair.apply import rollback as roll_back
        from stratacrawl.repair.propose import RepairError, propose
        from stratacrawl.wiring import open_app

        async with open_app(settings()) as comps:
            try:
                if history:
                    return await repairs.versions(comps.pool, source)
                if approve:
                    return await approve_proposal(comps, path, parsed, source, by=by,
                                                  comment=comment, proposal_id=proposal_id)
                if reject:
                    return await reject_proposal(comps, source, by=by, comment=comment,
                                                 proposal_id=proposal_id)
                if rollback is not None:
                    return await roll_back(comps, path, parsed, source, rollback, by=by)
                made = await propose(comps, parsed, parsed.get(source), sample)
                if made.auto_approvable and parsed.get(source).repair == "auto":
                    return made, await approve_proposal(
                        comps, path, parsed, source, by="repair: auto",
                        comment="every rule right on every pair held back",
                        proposal_id=made.id)
                return made, None
            except (RepairError, DecisionError) as e:
                fail(str(e))

    result = run(main())
    if approve or reject:
        _resume_paused(source, approve, comment)
    if history:
        _history(result, as_json)
    elif reject:
        emit_json({"rejected": result}) if as_json else console.print(
            f"{source}: proposal {result} rejected")
    elif approve or rollback is not None:
        _applied(result, as_json)
    else:
        made, applied = result
        _proposal(made, applied, as_json)
        if not made.complete:
            raise typer.Exit(EXIT_FAILED)


def _resume_paused(source: str, approved: bool, comment: str) -> None:
    """The decision made here, handed to the source's `repair` flow runs paused for it (they
    see the proposal decided and end Completed). Without a platform: nothing to resume."""
    import httpx

    from stratacrawl.stack import platform_record
    from stratacrawl.stack.lifecycle import PlatformAPI

    api = (platform_record(settings().state_path) or {}).get("prefect_api")
    if not api:
        return
    try:
        with PlatformAPI(api, timeout=5.0) as prefect:
            for r in prefect.paused_runs("repair", source=source):
                answer = prefect.resume(r["id"], {"approve": approved, "comment": (
                    comment or "decided from the command line")})
                console.print(f"resumed the paused repair run {r['name']}: {answer}",
                              highlight=False, markup=False)
    except httpx.HTTPError as e:   # the platform is down: its paused runs time out
        console.print(f"note: paused repair runs not resumed ({e})", highlight=False,
                      markup=False)


def _history(rows: list[Any], as_json: bool) -> None:
    if as_json:
        emit_json([{"version": r.version, "created_at": r.created_at, "reason": r.reason,
                    "extract": r.extract} for r in rows])
        return
    if not rows:
        console.print("no versions yet: the rules are the sources file's own")
    for r in rows:
        console.print(f"  {r.version}  {r.created_at:%Y-%m-%d %H:%M:%S}  {r.reason}",
                      highlight=False, markup=False)


def _applied(a: Applied, as_json: bool) -> None:
    if as_json:
        emit_json(a)
        return
    checked = ", ".join(f"{d} {'passed' if ok else 'FAILED'}" for d, ok in a.validation.items())
    console.print(f"{a.source}: rules version {a.version} written; {a.recleaned} page(s) "
                  f"re-cleaned ({a.records} records, {a.format_errors} still format errors); "
                  f"validated: {checked or 'no day to validate'}; {a.resolved} alert(s) "
                  "resolved", highlight=False, markup=False)


def _proposal(p: Proposal, applied: Applied | None, as_json: bool) -> None:
    if as_json:
        emit_json({**p.as_dict(), "applied": applied})
        return
    console.print(f"{p.source}: proposal {p.id if p.id is not None else '(not recorded)'} from "
                  f"{p.pairs} page(s) fetched again, paired with their records",
                  highlight=False, markup=False)
    for f in p.fields.values():
        if f.kept:
            console.print(f"  {f.name}: unchanged {f.before}", highlight=False, markup=False)
        elif f.after is None:
            console.print(f"  {f.name}: NO RULE — " + "; ".join(f.disagree),
                          highlight=False, markup=False)
        else:
            console.print(f"  {f.name}: {f.before} -> {f.after} (held back: precision "
                          f"{f.precision}, recall {f.recall})", highlight=False, markup=False)
    for s in p.samples:
        console.print(f"  {s['url']}: before {s['before']} after {s['after']}",
                      highlight=False, markup=False)
    if applied is not None:
        _applied(applied, False)
    elif p.complete:
        console.print(f"approve: stratacrawl repair {p.source} --approve (or resume the paused "
                      "`repair` flow run in the Prefect UI)", highlight=False, markup=False)
