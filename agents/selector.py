"""The Selector: picks a base and a reference kernel from the population."""

from __future__ import annotations

import logging

from agents.brief import target_brief
from agents.llm import RoleLLM
from agents.outcome import Outcome
from agents.prompts import load_prompt
from agents.schemas import Selection
from agents.views import KernelView, ProblemView, directives_text, population_table
from sandbox.summary import num

log = logging.getLogger(__name__)


def fallback_selection(population: list[KernelView]) -> Selection:
    """Best geometric mean as base; as reference, the kernel that beats the base by the widest
    margin on some shape, else the runner-up, else none."""
    ok = sorted((k for k in population if k.ok), key=lambda k: (k.geomean_us, k.generation))
    if not ok:
        raise ValueError("no correct kernel in the population to build on")
    base = ok[0]
    best_gain, reference = 1.0, None
    for other in ok[1:]:
        for shape, t in other.benchmarks.items():
            b = base.benchmarks.get(shape)
            if b and t > 0 and b / t > best_gain:
                best_gain, reference = b / t, other
    if reference is None and len(ok) > 1:
        reference = ok[1]
    why = f"{base.id} has the best geometric mean ({num(base.geomean_us)} µs)"
    if reference is not None and best_gain > 1.0:
        why += f"; {reference.id} is {best_gain:.2f}x faster than it on one shape"
    elif reference is not None:
        why += f"; {reference.id} is the runner-up"
    return Selection(base_id=base.id, reference_id=reference.id if reference else None, reason=why)


class Selector:
    def __init__(self, llm: RoleLLM | None) -> None:
        self.llm = llm
        self.prompt = load_prompt("selector")

    def select(
        self,
        problem: ProblemView,
        population: list[KernelView],
        directives: list[str],
        verified: str = "",
        findings: str = "",
    ) -> Outcome[Selection]:
        """`verified`: the side-by-side ratios the run measured, one pair a line, with intervals;
        `findings`: a few findings of the run, one line each (graph/nodes.py builds both)."""
        fallback = fallback_selection(population)
        if self.llm is None:
            return Outcome(fallback, "fallback", "no LLM configured")
        if sum(1 for k in population if k.ok) < 2:
            # One correct kernel: the base is forced and no model call can change it.
            return Outcome(fallback, "forced")
        system, user = self.prompt.render(
            problem=problem.name,
            target=problem.target,
            brief=target_brief(problem, "selector"),
            population=population_table(population),
            verified=verified,
            findings=findings,
            directives=directives_text(directives),
        )
        reply = self.llm.structured(system, user, Selection)
        if reply.value is None:
            return Outcome(fallback, "fallback", f"selector reply unusable: {reply.error}")
        by_id = {k.id: k for k in population}
        choice = reply.value
        base = by_id.get(choice.base_id)
        if base is None or not base.ok:
            return Outcome(fallback, "fallback", f"selector picked {choice.base_id!r}, not a correct kernel")
        if choice.reference_id is not None and (
            choice.reference_id not in by_id or choice.reference_id == choice.base_id
        ):
            choice = choice.model_copy(update={"reference_id": fallback.reference_id})
        return Outcome(choice, "llm")
