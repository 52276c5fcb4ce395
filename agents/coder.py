"""The Coder: turns one plan into a new submission file."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agents.brief import checklist, target_brief
from agents.llm import RoleLLM
from agents.prompts import load_prompt
from agents.schemas import CoderReply, Edit, ExperimentPlan
from agents.views import KernelView, ProblemView, as_diff_or_whole


class EditError(ValueError):
    pass


log = logging.getLogger(__name__)


def apply_edits(source: str, edits: list[Edit]) -> str:
    """Apply search/replace edits in order; each search text must occur exactly once."""
    for i, edit in enumerate(edits, 1):
        if not edit.search:
            raise EditError(f"edit {i} has an empty search text")
        count = source.count(edit.search)
        if count != 1:
            where = "does not occur" if count == 0 else f"occurs {count} times"
            raise EditError(f"edit {i}: the search text {where} in the base file: {edit.search[:80]!r}")
        source = source.replace(edit.search, edit.replace, 1)
    return source


def strip_fences(source: str) -> str:
    """Models sometimes wrap the file in a Markdown fence even inside JSON."""
    text = source.strip()
    if text.startswith("```"):
        first_newline = text.find("\n")
        text = text[first_newline + 1 :] if first_newline != -1 else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip() + "\n"


@dataclass
class Candidate:
    source: str | None
    summary: str = ""
    error: str | None = None  # why no source came out (unusable reply, edits that do not apply)


def reference_code(problem: ProblemView) -> str:
    """The reference implementation, where the Coder needs it: a problem without a description (a
    KernelBench file) or one whose correctness check lives in the reference. Otherwise the description
    says what to compute, the brief gives the tolerance, and the base shows the calling convention:
    the code would say all three again ('' leaves its block out)."""
    if problem.description.strip() and "reference code" not in problem.tolerance:
        return ""
    return problem.reference_code.strip()


class Coder:
    def __init__(self, llm: RoleLLM) -> None:
        self.llm = llm
        self.prompt = load_prompt("coder")

    def write(
        self,
        problem: ProblemView,
        plan: ExperimentPlan,
        base: KernelView,
        reference: KernelView | None,
        feedback: str = "",
        edit_target: str | None = None,
    ) -> Candidate:
        """A new file for `plan`. On a repair, `feedback` holds the failure and `edit_target` the
        failed file, which replaces the base as the file to edit."""
        shown = edit_target if edit_target is not None else base.source
        # The reference kernel only for plans that build on it, and as a diff when it is the base's near twin.
        shown_reference = reference if reference is not None and plan.uses_reference else None
        form, reference_source = (
            as_diff_or_whole(base.source, shown_reference.source, (base.id, shown_reference.id))
            if shown_reference else ("", "")
        )
        system, user = self.prompt.render(
            problem=problem.name,
            target=problem.target,
            description=problem.description.strip(),
            brief=target_brief(problem, "coder"),
            checklist=checklist(problem.target, "coder"),
            reference_code=reference_code(problem),
            plan_title=plan.title,
            plan_description=plan.description,
            plan_rubric="\n".join(f"- {r}" for r in plan.rubric) or "- (as described)",
            base_id=base.id if edit_target is None else f"{base.id}, as modified by your previous attempt",
            base_source=shown,
            reference_id=shown_reference.id if shown_reference else "",
            reference_form=form,
            reference_source=reference_source,
            feedback=feedback.strip(),
        )
        reply = self.llm.structured(system, user, CoderReply)
        if reply.value is None:
            return Candidate(None, error=f"coder reply unusable: {reply.error}")
        value = reply.value
        try:
            if value.mode == "edits" or (value.source is None and value.edits):
                source = apply_edits(shown, value.edits)
            elif value.source:
                source = strip_fences(value.source)
            else:
                return Candidate(None, error="coder reply had neither a file nor edits")
        except EditError as exc:
            return Candidate(None, error=str(exc))
        return Candidate(source, summary=value.summary.strip() or plan.title)
