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


# A finding's sentence that says a tunable's values do not matter, or that tuning it should stop.
_SETTLED = re.compile(
    r"\b(no (?:measurable |significant |real |visible )?(?:difference|effect|gain|change|improvement|speed-?up)"
    r"|made no difference|did ?n[o']t (?:matter|help|change anything)|does ?n[o']t matter|insensitive"
    r"|within (?:the )?noise|not measurably (?:different|faster|slower)"
    r"|stop (?:tuning|varying|changing)|(?:don'?t|do not|no need to|no point in) (?:tune|tuning|vary|varying))",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.;!?])\s+|\n")

# Values of one tunable whose kernels' geometric means all lie within this fraction of each other
# (at least FLAT_VALUES of them, the other tunables equal) made no measurable difference: timing
# noise on a shared machine is about this size.
FLAT_SPREAD = 0.03
FLAT_VALUES = 3


def _names_in(text: str, names: list[str]) -> list[str]:
    lowered = text.lower()
    return [n for n in names if n.lower() in lowered or n.lower().replace("_", " ") in lowered]


def settled_by_findings(names: list[str], findings: list[dict[str, Any]]) -> dict[str, str]:
    """Tunables a finding of the run says made no difference (or to stop tuning), in one sentence
    that names the tunable: {name: the finding's experiment id}."""
    settled: dict[str, str] = {}
    for finding in findings:
        text = " ".join(str(finding.get(k) or "") for k in ("hypothesis", "change", "explanation", "lesson"))
        for sentence in _SENTENCE.split(text):
            if _SETTLED.search(sentence):
                for name in _names_in(sentence, names):
                    settled.setdefault(name, str(finding.get("experiment_id") or "a finding"))
    return settled


def flat_tunables(base: KernelRecord, population: list[KernelRecord]) -> dict[str, str]:
    """Tunables whose measured values made no difference: at least FLAT_VALUES values tried with the
    other tunables at the base's values, their geometric means within FLAT_SPREAD of each other.
    {name: 'values v1, v2, v3 within 3%'}."""
    family = family_key(base.source)
    if family is None:
        return {}
    around = current_assignment(parse_tunables(base.source))
    times: dict[str, dict[str, float]] = {name: {} for name in around}
    for kernel in population:
        if not kernel.ok or family_key(kernel.source) != family:
            continue
        try:
            assignment = current_assignment(parse_tunables(kernel.source))
        except TunableError:
            continue
        moved = [n for n in around if assignment.get(n) != around[n]]
        if len(moved) > 1:
            continue  # two tunables moved: neither one's effect alone
        # The base's own values count for every tunable; a kernel that moved one, for that one.
        for name in moved or list(around):
            times[name].setdefault(assignment[name], kernel.geomean_us or 0.0)
    flat = {}
    for name, by_value in times.items():
        values = [t for t in by_value.values() if t > 0]
        if len(values) >= FLAT_VALUES and max(values) <= min(values) * (1 + FLAT_SPREAD):
            flat[name] = f"values {', '.join(sorted(by_value))} within {FLAT_SPREAD:.0%} of each other"
    return flat


def frozen_reasons(
    base: KernelRecord,
    population: list[KernelRecord],
    directives: list[str] | None = None,
    findings: list[dict[str, Any]] | None = None,
) -> dict[str, str]:
    """Each tunable of the base the Tuner leaves at the base's value, and why: a directive names it,
    a finding says it made no difference, or its measured values did not differ."""
    try:
        names = [t.name for t in parse_tunables(base.source)]
    except TunableError:
        return {}
    reasons = {name: "a directive" for name in frozen_tunables(names, directives or [])}
    for name, fid in settled_by_findings(names, findings or []).items():
        reasons.setdefault(name, f"finding {fid}")
    for name, why in flat_tunables(base, population).items():
        reasons.setdefault(name, f"measured: {why}")
    return reasons


def tune_plans(
    base: KernelRecord,
    population: list[KernelRecord],
    limit: int,
    directives: list[str] | None = None,
    findings: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Up to `limit` experiments, each one untried assignment around the base's values that leaves
    at the base's values the tunables that directives freeze, that the run's findings say made no
    difference, or whose measured values did not differ:
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
    reasons = frozen_reasons(base, population, directives, findings)
    frozen = set(reasons)
    # Nearest first: asking for more and dropping those that move a frozen tunable keeps the order.
    proposals = plan_tuning(base.source, tried_assignments(base.source, population), limit + 200 if frozen else limit)
    proposals = [a for a in proposals if all(a[name] == around[name] for name in frozen)][:limit]
    if frozen:
        log.info("the Tuner leaves %s at the base's values",
                 "; ".join(f"{name} ({reasons[name]})" for name in sorted(frozen)))
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
