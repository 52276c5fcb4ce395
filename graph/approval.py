"""Approval mode: the run stops before each generation's experiments until a person reviews the plans.

The `approve` node sits between `research` and the experiment fan-out. With approval on (archive
meta `approval`), it calls LangGraph's `interrupt()` with the generation's plans; the graph stops
and its checkpoint holds the pending interrupt. `settle_approvals`, in the process executing the
run, then publishes the plans in the archive (meta `pending_approval`), waits for a review that a
chat (in this process or another) submits with `submit_review`, and resumes the graph with
`Command(resume=review)`. The node runs again, `interrupt()` returns the review, and the plans that
survive it go on to the experiments.

A review accepts the plans, rejects them all (the generation runs no experiment), or edits them:
keep some, change a plan's title, description or rubric, add plans of the user's own. Plans turned
down become a directive, so the next Researcher does not propose them again. The review is stored
under the step `g<n>/approval`, so a resumed run never asks twice.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt
from pydantic import BaseModel, Field

from agents.schemas import ExperimentPlan
from graph import control
from graph.archive import Archive
from graph.context import RunContext
from graph.state import ExperimentSpec, RunState

log = logging.getLogger(__name__)


class PlanChange(BaseModel):
    """New wording for one plan; fields left out keep their value."""

    id: str = Field(description="The experiment id of the plan, e.g. g3e1.")
    title: str | None = None
    description: str | None = None
    rubric: list[str] | None = None


class PlanReview(BaseModel):
    """A person's decision on a generation's plans."""

    action: Literal["accept", "reject", "edit"]
    keep: list[str] | None = Field(
        default=None, description="For edit: the experiment ids to run (default: all of them)."
    )
    changes: list[PlanChange] = Field(default_factory=list, description="For edit: plans reworded.")
    add: list[ExperimentPlan] = Field(default_factory=list, description="For edit: new plans to run as well.")
    note: str = Field(default="", description="Why, in the user's words; kept with the turned-down plans.")
    remember: bool = Field(default=True, description="Add the turned-down plans to the directives.")


class ReviewError(ValueError):
    pass


def approval_payload(generation: int, selection: dict[str, Any], plans: list[ExperimentSpec]) -> dict[str, Any]:
    return {
        "generation": generation,
        "base_id": selection.get("base_id"),
        "reference_id": selection.get("reference_id"),
        "plans": [dict(p) for p in plans],
    }


def check_review(review: PlanReview, plans: list[dict[str, Any]]) -> None:
    """Refuse a review that names plans the generation does not have, or edits a Tuner variant."""
    by_id = {p["id"]: p for p in plans}
    unknown = [i for i in (review.keep or []) + [c.id for c in review.changes] if i not in by_id]
    if unknown:
        raise ReviewError(f"no plan {', '.join(unknown)} in this generation (plans: {', '.join(by_id) or 'none'})")
    tuned = [c.id for c in review.changes if by_id[c.id].get("kind") != "llm"]
    if tuned:
        raise ReviewError(f"{', '.join(tuned)}: a Tuner variant has no wording to change; keep or drop it")


def apply_review(plans: list[ExperimentSpec], review: PlanReview, selection: dict[str, Any]) -> list[ExperimentSpec]:
    """The plans that run after the review (kept ids stay, added plans take the next indices)."""
    if review.action == "accept":
        return list(plans)
    if review.action == "reject":
        return []
    keep = set(review.keep) if review.keep is not None else {p["id"] for p in plans}
    changes = {c.id: c for c in review.changes}
    result: list[ExperimentSpec] = []
    for spec in plans:
        if spec["id"] not in keep:
            continue
        change = changes.get(spec["id"])
        if change is not None:
            updates = change.model_dump(exclude={"id"}, exclude_none=True)
            spec = ExperimentSpec(**(dict(spec) | {"plan": dict(spec["plan"]) | updates}))
        result.append(spec)
    next_idx = max((p["idx"] for p in plans), default=-1) + 1
    generation = plans[0]["generation"] if plans else 0
    for offset, plan in enumerate(review.add):
        idx = next_idx + offset
        result.append(
            ExperimentSpec(
                id=f"g{generation}e{idx}",
                generation=generation,
                idx=idx,
                kind="llm",
                plan=plan.model_dump() | {"by": "user"},
                assignment=None,
                base_id=selection["base_id"],
                reference_id=selection.get("reference_id"),
            )
        )
    return result


def turned_down_directive(generation: int, dropped: list[ExperimentSpec], note: str) -> str | None:
    titles = [f"'{p['plan'].get('title', p['id'])}'" for p in dropped if p.get("kind") == "llm"]
    if not titles:
        return None
    text = f"The user turned down these plans in generation {generation}; do not propose them again: "
    text += ", ".join(titles)
    return text + (f". Reason: {note.strip()}" if note.strip() else ".")


def approve(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The node: with approval on, wait (interrupt) for the review of this generation's plans."""
    ctx = runtime.context
    generation = state["generation"]
    plans = list(state.get("plans") or [])
    key = f"g{generation}/approval"
    stored = ctx.archive.get_step(key)
    if stored is None:
        if not plans or not control.approval_enabled(ctx.archive):
            return {}
        selection = state.get("selection") or {}
        decision = interrupt(approval_payload(generation, selection, plans))
        review = PlanReview.model_validate(decision)
        if not ctx.llm_enabled and review.add:
            log.warning("generation %d: plans added in review need an LLM Coder; ignoring them", generation)
            review = review.model_copy(update={"add": []})
        ctx.archive.put_step(key, review.model_dump())
        kept = {p["id"] for p in apply_review(plans, review, selection)}
        directive = turned_down_directive(generation, [p for p in plans if p["id"] not in kept], review.note)
        if review.remember and directive:
            ctx.archive.add_directive(directive)
    else:
        review = PlanReview.model_validate(stored)
    approved = apply_review(plans, review, state.get("selection") or {})
    ctx.progress.event(
        "reviewed", generation=generation, action=review.action, plans=[p["plan"].get("title") for p in approved]
    )
    return {"plans": approved}


# -- the executing process's side --------------------------------------------------------------------


def settle_approvals(app: Any, config: dict[str, Any], ctx: RunContext, final: dict[str, Any]) -> dict[str, Any]:
    """While the graph stopped at an approval interrupt, wait for the review and resume with it."""
    while final.get("__interrupt__"):
        payload = final["__interrupt__"][0].value
        review = wait_for_review(ctx, payload)
        final = app.invoke(Command(resume=review.model_dump()), config, context=ctx)
    return final


def wait_for_review(ctx: RunContext, payload: dict[str, Any], poll_s: float = control.POLL_S) -> PlanReview:
    """Publish the pending plans and wait for a review. A stop request skips the generation's
    experiments; turning approval mode off accepts the plans."""
    archive = ctx.archive
    generation = payload["generation"]
    archive.set_meta("pending_approval", payload)
    archive.set_meta("status", "awaiting_approval")
    ctx.progress.event(
        "awaiting_approval", generation=generation, plans=[p["plan"].get("title") for p in payload["plans"]]
    )
    log.info("generation %d: %d plans await approval", generation, len(payload["plans"]))
    try:
        while True:
            decision = archive.get_meta("approval_decision")
            if isinstance(decision, dict) and decision.get("generation") == generation:
                return PlanReview.model_validate(decision["review"])
            if control.current(archive) == "stop" or ctx.stop.is_set():
                return PlanReview(action="reject", note="the run was stopped", remember=False)
            if not control.approval_enabled(archive):
                return PlanReview(action="accept", note="approval mode was turned off")
            time.sleep(poll_s)
    finally:
        archive.set_meta("pending_approval", None)
        archive.set_meta("approval_decision", None)
        archive.set_meta("status", "running")


# -- the reviewer's side -------------------------------------------------------------------------------


def submit_review(archive: Archive, review: PlanReview) -> dict[str, Any]:
    """Hand a review to the waiting run; returns the pending payload it answers."""
    pending = control.pending_plans(archive)
    if pending is None:
        raise ReviewError("no plans are waiting for approval")
    check_review(review, pending["plans"])
    archive.set_meta("approval_decision", {"generation": pending["generation"], "review": review.model_dump()})
    return pending
