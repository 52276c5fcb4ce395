"""The Tuner: proposes variants of a kernel's declared tunables, without an LLM.

Variants of one kernel family differ only at their tunables' definition sites. Which
assignments were tried is read from the archive: every kernel of the same family (same source
once the tunables are normalised) counts, so the search never repeats an evaluation and
resumes where it stopped.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from agents.schemas import ExperimentPlan
from graph.archive import KernelRecord
from sandbox.tunables import (
    TunableError,
    current_assignment,
    describe,
    parse_tunables,
    plan_tuning,
    render,
    skeleton,
)

log = logging.getLogger(__name__)


def family_key(source: str) -> str | None:
    """The source with every tunable's value blanked: equal for all variants of a kernel."""
    try:
        if not parse_tunables(source):
            return None
        return skeleton(source)
    except TunableError:
        return None


def tried_assignments(base_source: str, population: list[KernelRecord]) -> list[dict[str, str]]:
    family = family_key(base_source)
    if family is None:
        return []
    tried = []
    for kernel in population:
        if family_key(kernel.source) == family:
            try:
                tried.append(current_assignment(parse_tunables(kernel.source)))
            except TunableError:
                continue
    return tried


_STOP = re.compile(r"\b(stop|don'?t|do not|no more|never|freeze|fix|keep|leave)\b", re.I)


def frozen_tunables(names: list[str], directives: list[str]) -> set[str]:
    """Tunables a directive tells the Tuner to leave alone: it names the tunable (as written, or
    in words: THREAD_COUNT as 'thread count') beside stop, don't, freeze, keep, leave..."""
    frozen = set()
    for directive in directives:
        if not _STOP.search(directive):
            continue
        lowered = directive.lower()
        for name in names:
            if name.lower() in lowered or name.lower().replace("_", " ") in lowered:
                frozen.add(name)
    return frozen


def tune_plans(
    base: KernelRecord, population: list[KernelRecord], limit: int, directives: list[str] | None = None
) -> list[dict[str, Any]]:
    """Up to `limit` experiments, each one untried assignment around the base's values that leaves
    the tunables the directives freeze at the base's values:
    [{"plan": ExperimentPlan fields, "assignment": {...}}]."""
    if limit <= 0:
        return []
    try:
        tunables = parse_tunables(base.source)
    except TunableError as exc:
        log.warning("kernel %s declares tunables the Tuner cannot use: %s", base.id, exc)
        return []
    if not tunables:
        return []
    around = current_assignment(tunables)
    frozen = frozen_tunables([t.name for t in tunables], directives or [])
    # Nearest first: asking for more and dropping those that move a frozen tunable keeps the order.
    proposals = plan_tuning(base.source, tried_assignments(base.source, population), limit + 200 if frozen else limit)
    proposals = [a for a in proposals if all(a[name] == around[name] for name in frozen)][:limit]
    if frozen:
        log.info("the Tuner leaves %s at the base's values, as directed", ", ".join(sorted(frozen)))
    plans = []
    for assignment in proposals:
        change = describe(assignment, around)
        plan = ExperimentPlan(
            title=f"tune {change}",
            description=f"Set the declared tunables of {base.id} to {change}; everything else unchanged.",
            rubric=[f"{k} = {v}" for k, v in assignment.items() if around.get(k) != v],
            est_min_speedup=0.9,
            est_max_speedup=1.2,
            innovation=0.0,
        )
        plans.append({"plan": plan.model_dump(), "assignment": assignment})
    return plans


def render_variant(base_source: str, assignment: dict[str, str]) -> str:
    return render(base_source, assignment)
