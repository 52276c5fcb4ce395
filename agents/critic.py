"""The Critic: reviews a candidate before it runs and explains the result after."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from agents.brief import checklist, target_brief
from agents.llm import RoleLLM
from agents.outcome import Outcome
from agents.prompts import load_prompt
from agents.schemas import ExperimentPlan, Explanation, Review
from agents.views import KernelView, ProblemView, as_diff_or_whole, compact_report, shape_table
from sandbox.summary import num, unpaired_ratio

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SideBySide:
    """A speed-up over the base measured side by side: base time / candidate time, with its interval."""

    ratio: float
    ratio_ci: tuple[float, float]
    difference: str
    # Per benchmark shape: its own side-by-side ratio and interval (a gain may hold on one shape only).
    shapes: dict[str, tuple[float, float, float]] = field(default_factory=dict)


@dataclass
class RunOutcome:
    """What the sandbox said about a candidate, as the Critic needs it."""

    candidate: KernelView
    base: KernelView
    errors: str = ""
    resources: str = ""
    diff: str = ""
    # The candidate and its base timed side by side (alternating rounds, same inputs): its speed-up,
    # interval and reading. Where present it is the figure; two separate timings are not.
    paired: SideBySide | None = None

    @property
    def speedup(self) -> float | None:
        if self.paired is not None and self.candidate.ok:
            return self.paired.ratio
        a, b = self.base.geomean_us, self.candidate.geomean_us
        return a / b if a and b and self.candidate.ok else None

    @property
    def difference(self) -> str:
        """faster, slower, or no measurable difference: the side-by-side interval decides, else the
        two timings' intervals."""
        if not self.candidate.ok:
            return "not measured"
        if self.paired is not None:
            return self.paired.difference
        compared = unpaired_ratio(self.base.geomean_us, self.base.geomean_ci_us, self.candidate.geomean_us,
                                  self.candidate.geomean_ci_us)
        return compared[2] if compared else "not measured"

    def shape_table(self) -> str:
        """Per-shape medians of the two timings, and where the pair was timed side by side each
        shape's own ratio with its interval: the column to read."""
        table = shape_table(self.candidate, self.base, ("candidate", "base"))
        if self.paired is None or not self.paired.shapes or not table.startswith("| shape"):
            return table
        lines = table.splitlines()
        lines[0] += " side by side (base / candidate) |"
        lines[1] += " --- |"
        for i, line in enumerate(lines[2:], 2):
            shape = line.split(" | ")[0].removeprefix("| ")
            ratio = self.paired.shapes.get(shape)
            lines[i] += f" {num(ratio[0])}x [{num(ratio[1])}–{num(ratio[2])}] |" if ratio else " - |"
        return "\n".join(lines)

    def describe(self) -> str:
        c = self.candidate
        if not c.ok:
            return f"{c.status}: {c.message[:500]}"
        compared = unpaired_ratio(self.base.geomean_us, self.base.geomean_ci_us, c.geomean_us, c.geomean_ci_us)
        if compared is None:
            return f"correct; geometric mean {c.time_text()} (base not timed)"
        gain, interval, said = compared
        within = f" [{num(interval[0])}–{num(interval[1])}]" if interval else ""
        separate = f"correct; geometric mean {c.time_text()} against the base's {self.base.time_text()}"
        if self.paired is None:
            return f"{separate}: {num(gain)}x{within}, {said}"
        lo, hi = self.paired.ratio_ci
        return (f"{separate}, timed apart ({num(gain)}x); timed side by side with the base, alternating on the "
                f"same inputs: {num(self.paired.ratio)}x [{num(lo)}–{num(hi)}], {self.paired.difference}. "
                "The side-by-side figure is the measurement.")



def expected_range(plan: ExperimentPlan) -> str:
    return f"{plan.est_min_speedup:.3g}x to {plan.est_max_speedup:.3g}x"


def fallback_review(integrity: list[dict[str, object]]) -> Review:
    errors = [f"line {f.get('line')}: {f.get('reason')}" for f in integrity if f.get("severity") == "error"]
    return Review(approve=not errors, issues=errors, advice="Remove what the integrity scan flags." if errors else "")


def fallback_explanation(plan: ExperimentPlan, outcome: RunOutcome) -> Explanation:
    """A finding from the numbers alone, when the LLM is absent or failed."""
    gain = outcome.speedup
    if gain is None:
        why = f"The candidate did not produce a timed, correct result ({outcome.describe()})."
        lesson = "Fix the cause above before building on this plan."
    elif outcome.difference == "no measurable difference":
        why = f"Measured {gain:.3g}x, within the timings' noise, against the expected {expected_range(plan)}."
        lesson = "No measurable effect in this form: neither a gain nor a loss to build on."
    elif gain >= 1.0:
        why = f"Measured {gain:.3g}x against the expected {expected_range(plan)}."
        lesson = "The change helps; later experiments can build on it."
    else:
        why = f"Measured {gain:.3g}x (slower) against the expected {expected_range(plan)}."
        lesson = "The change does not pay on this target in this form."
    return Explanation(
        hypothesis=plan.description or plan.title,
        change="; ".join(plan.rubric) or plan.title,
        explanation=why,
        lesson=lesson,
    )


class Critic:
    def __init__(self, llm: RoleLLM | None) -> None:
        self.llm = llm
        self.review_prompt = load_prompt("critic_review")
        self.explain_prompt = load_prompt("critic_explain")

    def review(
        self,
        plan: ExperimentPlan,
        source: str,
        integrity: list[dict[str, object]],
        resources: str,
        problem: ProblemView | None = None,
        base: KernelView | None = None,
    ) -> Outcome[Review]:
        """Review `source` against the plan, the problem's brief and tolerance; with `base`, the
        candidate is shown as its diff against the base when that is shorter."""
        fallback = fallback_review(integrity)
        if self.llm is None:
            return Outcome(fallback, "fallback", "no LLM configured")
        findings = "\n".join(f"- [{f.get('severity')}] line {f.get('line')}: {f.get('reason')}" for f in integrity)
        form, shown = as_diff_or_whole(base.source, source, (base.id, "candidate")) if base else ("whole", source)
        system, user = self.review_prompt.render(
            problem=problem.name if problem else "",
            target=problem.target if problem else "",
            description=problem.description.strip() if problem else "",
            brief=target_brief(problem, "critic_review") if problem else "",
            checklist=checklist(problem.target, "critic_review") if problem else "",
            plan_title=plan.title,
            plan_description=plan.description,
            plan_rubric="\n".join(f"- {r}" for r in plan.rubric) or "- (as described)",
            candidate_form=form,
            candidate_source=shown,
            integrity=findings or "(nothing flagged)",
            resources=compact_report(resources),
        )
        reply = self.llm.structured(system, user, Review)
        if reply.value is None:
            return Outcome(fallback, "fallback", f"critic review unusable: {reply.error}")
        review = reply.value
        if fallback.issues and review.approve:
            # The integrity scan's errors are facts, not opinions: they override an approval.
            review = Review(approve=False, issues=fallback.issues + review.issues, advice=review.advice)
        return Outcome(review, "llm")

    def explain(
        self, plan: ExperimentPlan, outcome: RunOutcome, problem: ProblemView | None = None, siblings: str = ""
    ) -> Outcome[Explanation]:
        """The finding; `siblings` lists the other experiments of the generation with their outcomes,
        so a plan's question that a sibling answers can be answered."""
        fallback = fallback_explanation(plan, outcome)
        if self.llm is None:
            return Outcome(fallback, "fallback", "no LLM configured")
        # A rewrite's diff is longer than the file it makes: the candidate is shown whole then.
        form, shown = ("as a diff against the base" if outcome.diff else ""), outcome.diff
        if outcome.diff and outcome.candidate.source and outcome.base.source:
            form, shown = as_diff_or_whole(outcome.base.source, outcome.candidate.source, ("base", "candidate"))
        system, user = self.explain_prompt.render(
            brief=target_brief(problem, "critic_explain") if problem else "",
            siblings=siblings,
            plan_title=plan.title,
            plan_description=plan.description,
            expected=expected_range(plan),
            outcome=outcome.describe(),
            shape_table=outcome.shape_table(),
            errors=outcome.errors,
            resources=compact_report(outcome.resources),
            candidate_form=form,
            diff=shown,
        )
        reply = self.llm.structured(system, user, Explanation)
        if reply.value is None:
            return Outcome(fallback, "fallback", f"critic explanation unusable: {reply.error}")
        return Outcome(reply.value, "llm")
