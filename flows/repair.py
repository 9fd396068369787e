"""repair: new extraction rules for a source whose site changed layout, proposed from its
known items fetched again, and approved in the Prefect UI before anything changes.

The run proposes (``stratacrawl.repair.propose``), publishes the proposal as a Markdown
artifact (per field the rule before and after, its precision and recall on pairs held
back, sample values before and after), and pauses for a typed input — approve or reject,
with a comment — which the Prefect UI shows as a form on the paused run (or
``stratacrawl repair SOURCE --approve``, which resumes it). On approval the rules are
written into the sources file as a new version, the pages the old rules failed on
re-cleaned, their days validated and the layout alerts resolved. A source with
``repair: auto`` skips the pause when every rule was right on every pair held back. The
``stratacrawl: repair a source whose layout changed`` automation starts this flow when
the minute-level integrity check raises its P1 alert.
"""

from __future__ import annotations

from prefect import flow
from prefect.context import get_run_context
from prefect.flow_runs import apause_flow_run
from prefect.input import RunInput
from prefect.states import Completed, Failed, State

from flows.common import flow_sources, load_settings, publish, step
from stratacrawl.cold import repairs
from stratacrawl.repair.apply import approve, reject
from stratacrawl.repair.propose import Proposal, RepairError, propose
from stratacrawl.wiring import open_app


class RepairDecision(RunInput):
    """Write the proposed rules into the sources file (and re-clean, re-validate)?"""

    approve: bool = False
    comment: str = ""


def proposal_markdown(p: Proposal) -> list[str]:
    lines = [f"Proposal {p.id} for **{p.source}**, from {p.pairs} page(s) of known items "
             "fetched again now, each paired with the values its record holds.", "",
             "| field | rule now | proposed | precision | recall |", "|---|---|---|---|---|"]
    for f in p.fields.values():
        proposed = "unchanged" if f.kept else (f"`{f.after}`" if f.after else
                                               "**none**: " + "; ".join(f.disagree)[:300])
        lines.append(f"| {f.name} | `{f.before}` | {proposed} | "
                     f"{'' if f.precision is None else f'{f.precision:.2f}'} | "
                     f"{'' if f.recall is None else f'{f.recall:.2f}'} |")
    lines += ["", "Sample pages (values before: the record; after: the proposed rules):", ""]
    for s in p.samples:
        lines.append(f"- {s['url']}: before `{s['before']}`, after `{s['after']}`")
    return lines


@flow(name="repair", log_prints=True)
async def repair(source: str, sources_file: str | None = None, sample: int = 12,
                 wait_minutes: float = 24 * 60) -> State:
    """Propose rules for ``source`` from ``sample`` known items fetched again, then wait
    (at most ``wait_minutes``) for an approval on this paused run."""
    settings = await load_settings(sources=sources_file)
    sources = flow_sources(settings, source=source)
    async with open_app(settings) as comps:
        try:
            made = await step("propose", lambda: propose(comps, sources, sources.get(source),
                                                         sample))
        except RepairError as e:
            return Failed(message=str(e))
        await publish("stratacrawl-repair", f"Repair of {source}", proposal_markdown(made))
        if not made.complete:
            broken = [f.name for f in made.fields.values() if not f.kept and f.after is None]
            return Failed(message=f"{source}: no rule explains the pairs for "
                                  f"{', '.join(broken)} (see the artifact)")
        if sources.get(source).repair == "auto" and made.auto_approvable:
            decision = RepairDecision(approve=True, comment="repair: auto — every rule right "
                                                            "on every pair held back")
            by = "repair: auto"
        else:
            decision = await apause_flow_run(
                wait_for_input=RepairDecision.with_initial_data(
                    description=f"Approve the proposed rules of {source} (proposal {made.id}; "
                                "see the artifact)?", approve=False),
                timeout=int(wait_minutes * 60))
            by = f"flow run {get_run_context().flow_run.name}"   # type: ignore[union-attr]
    async with open_app(settings) as comps:   # (a pause may outlast connections)
        row = await repairs.proposal(comps.pool, source, made.id)
        if row is not None and row.state != "proposed":   # decided on the command line
            return Completed(message=f"{source}: proposal {made.id} was {row.state} meanwhile "
                                     f"(by {row.decided_by})")
        if not decision.approve:
            await reject(comps, source, by=by, comment=decision.comment, proposal_id=made.id)
            return Completed(message=f"{source}: proposal {made.id} rejected")
        applied = await step("apply", lambda: approve(
            comps, settings.sources, sources, source, by=by, comment=decision.comment,
            proposal_id=made.id))
    checked = ", ".join(f"{d} {'passed' if ok else 'FAILED'}"
                        for d, ok in applied.validation.items())
    return Completed(message=f"{source}: rules version {applied.version}; {applied.recleaned} "
                             f"page(s) re-cleaned, {applied.format_errors} still failing; "
                             f"validated {checked or 'no day'}")
