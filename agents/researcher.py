"""The Researcher: designs experiments from the base kernel, literature and earlier findings."""

from __future__ import annotations

import logging
import math
import re

from agents.brief import checklist, roofline_with_times, target_brief
from agents.llm import RoleLLM
from agents.outcome import Outcome
from agents.prompts import load_prompt
from agents.schemas import ExperimentPlan, ResearchPlan
from agents.views import KernelView, ProblemView, as_diff_or_whole, compact_report, directives_text, shape_table
from sandbox.summary import num

log = logging.getLogger(__name__)


def choose_plans(plans: list[ExperimentPlan], k: int = 3) -> list[ExperimentPlan]:
    """The method's picks, in this order: the highest minimum gain (the likeliest win), the most
    innovative, the highest expected gain; distinct plans, topped up in the order given when the
    picks coincide. With k=2 the highest-minimum plan runs (it came third and never did), and the
    expected gain is the geometric middle of the range, not its top: a plan does not win a slot by
    inflating its optimistic estimate alone."""
    if k <= 0 or not plans:
        return []
    orders = [
        sorted(plans, key=lambda p: -p.est_min_speedup),
        sorted(plans, key=lambda p: -p.innovation),
        sorted(plans, key=lambda p: -math.sqrt(max(p.est_min_speedup, 1e-9) * max(p.est_max_speedup, 1e-9))),
    ]
    chosen: list[ExperimentPlan] = []
    for order in orders:
        for plan in order:
            if all(plan is not c for c in chosen):
                chosen.append(plan)
                break
        if len(chosen) == k:
            return chosen
    for plan in plans:
        if len(chosen) == k:
            break
        if all(plan is not c for c in chosen):
            chosen.append(plan)
    return chosen


_TARGET_WORDS = {"cpu": "CPU SIMD", "cuda": "NVIDIA GPU CUDA", "hip": "AMD GPU HIP"}
_ISA_WORDS = ("avx512f", "avx2", "fma", "sve", "asimd")


def target_words(problem: ProblemView) -> str:
    """The target in the words documents use: the CPU's vector instruction set, the GPU's vendor."""
    words = [_TARGET_WORDS.get(problem.target, problem.target)]
    hardware = problem.hardware.lower()
    if problem.target == "cpu":
        words += [w.upper() for w in _ISA_WORDS if re.search(rf"\b{w}\b", hardware)]
    return " ".join(words)


def research_query(problem: ProblemView, base: KernelView, directives: list[str]) -> str:
    """What to look up: the problem on this target, the measured bottleneck, the plan that made the
    base (its title and description; the seed has none, and its first comment is not a question),
    and the user's goals."""
    plan = base.plan or {}
    parts = [problem.name.replace("_", " "), target_words(problem), problem.bottleneck,
             str(plan.get("title", "")), str(plan.get("description", ""))]
    parts += directives
    return " ".join(p.strip() for p in parts if p and p.strip())[:500]


def shape_times(*kernels: KernelView | None) -> dict[str, str]:
    """Per benchmark shape, the kernels' medians: {'rows=8, cols=8': 'k1 700 µs, k0 900 µs'}."""
    shown = [k for k in kernels if k is not None]
    shapes = sorted({s for k in shown for s in k.benchmarks})
    return {s: ", ".join(f"{k.id} {num(k.benchmarks[s])} µs" for k in shown if s in k.benchmarks) for s in shapes}


def _time(kernel: KernelView) -> str:
    """Its time, the seed named as such (the roofline's "seed" times are its own)."""
    return ("the seed, " if kernel.origin == "seed" else "") + kernel.time_text()


class Researcher:
    def __init__(self, llm: RoleLLM | None) -> None:
        self.llm = llm
        self.prompt = load_prompt("researcher")

    def design(
        self,
        problem: ProblemView,
        base: KernelView,
        reference: KernelView | None,
        context: str,
        directives: list[str],
        picks: int = 3,
        base_report: str = "",
        tuner: str = "",
    ) -> Outcome[ResearchPlan] | None:
        """The full reply with `plans` reduced to the picks; None without an LLM or a usable reply
        (the error is logged and the caller falls back to the Tuner). `base_report` is the base's
        static report (which loops were vectorised on a CPU; registers, spills and occupancy on a
        GPU): a plan to vectorise a loop the compiler already vectorised is a wasted experiment.
        `tuner` names the tunable assignments the Tuner tries in the same generation ('EXP_UNROLL 1→4'):
        a plan that sets one of them would be the same kernel twice."""
        if self.llm is None:
            return None
        form, reference_source = as_diff_or_whole(base.source, reference.source, (base.id, reference.id)) \
            if reference else ("", "")
        # The base's and the reference's per-shape times join the roofline's line for each shape, where
        # every shape has one (the seed's are there already, as "seed"); else they are a table of their own.
        joined = roofline_with_times(problem.roofline, shape_times(base, reference)) is not None
        times = shape_times(*(k for k in (base, reference) if k is not None and k.origin != "seed"))
        system, user = self.prompt.render(
            problem=problem.name,
            target=problem.target,
            description=problem.description.strip(),
            brief=target_brief(problem, "researcher", times if joined else None),
            checklist=checklist(problem.target, "researcher"),
            base_id=base.id,
            base_time=_time(base),
            base_source=base.source.rstrip(),
            base_report=compact_report(base_report),
            tuner=tuner,
            reference_id=reference.id if reference else "",
            reference_time=_time(reference) if reference else "",
            reference_form=form,
            reference_source=reference_source,
            shape_table="" if joined else shape_table(base, reference, (base.id, reference.id if reference else "-")),
            context=context,
            directives=directives_text(directives),
        )
        reply = self.llm.structured(system, user, ResearchPlan)
        if reply.value is None:
            return Outcome(ResearchPlan(plans=[]), "fallback", f"researcher reply unusable: {reply.error}")
        plans = [p for p in reply.value.plans if p.title.strip()]
        if not plans:
            return Outcome(ResearchPlan(plans=[]), "fallback", "researcher gave no plans")
        chosen = choose_plans(plans, picks)
        return Outcome(ResearchPlan(avenues=reply.value.avenues, plans=chosen), "llm")
