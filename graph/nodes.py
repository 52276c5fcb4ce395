"""The graph's nodes: seed, select, research, experiment and explain (each fanned out), collect."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from agents.researcher import research_query
from agents.schemas import ResearchPlan, Selection
from agents.views import KernelView, ProblemView, finding_line
from graph import control, verify
from graph.archive import KernelRecord, utc_now
from graph.config import KNOWLEDGE_TAG
from graph.context import RunContext
from graph.experiment import explain_experiment, kernel_report, measure_experiment
from graph.problem_view import problem_view
from graph.state import ExperimentSpec, RunState
from graph.tuner import frozen_reasons, tune_plans
from sandbox.summary import num
from sandbox.verdict import Verdict

log = logging.getLogger(__name__)

# A new best must beat the old one by this fraction to reset the patience counter: timing noise
# on a shared machine is about this size.
MIN_IMPROVEMENT = 0.005


class SeedFailed(RuntimeError):
    pass


def seed(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Evaluate the starting kernel once; it is generation 0 of the population."""
    ctx = runtime.context
    existing = ctx.archive.seed()
    if existing is None:
        source = ctx.archive.get_meta("seed_source")
        ctx.progress.event("seed", step="evaluating the seed kernel")
        record = KernelRecord(
            id="",
            generation=0,
            origin="seed",
            summary=seed_summary(source),
            source="",
            sha256="",
            status="pending",
            experiment_id="seed",
        )
        existing = ctx.evaluator.evaluate(source, record)
    if not existing.ok:
        return {"stop_reason": seed_failure(existing, ctx.config.seed), "generation": 0}
    ctx.progress.event("seed_done", kernel=existing.id, geomean_us=existing.geomean_us)
    if not ctx.view.roofline:
        verdict_json = ctx.archive.kernel_verdict(existing.id)
        if verdict_json:
            ctx.view = problem_view(ctx.archive, ctx.config, Verdict.from_json(verdict_json))
    best = ctx.archive.best()
    return {
        "generation": state.get("generation") or 1,
        "best_id": best.id if best else existing.id,
        "best_geomean_us": best.geomean_us if best else existing.geomean_us,
        "stale": state.get("stale", 0),
        "elapsed_s": state.get("elapsed_s", 0.0),
        "stop_reason": None,
    }


def seed_failure(seed: KernelRecord, seed_path: str | None = None) -> str:
    """Why the run cannot start, naming the seed's file where the user gave one and its status once:
    its message (graph/evaluation.py's verdict_message) starts with the status already, and
    `(runtime_error): runtime_error:` said it twice."""
    message = seed.message.strip()
    if not message.startswith(f"{seed.status}:"):
        message = f"{seed.status}: {message}".strip()
    named = f" {Path(seed_path).name}" if seed_path else ""
    return f"the seed kernel{named} does not pass: {message[:500]}"


def seed_summary(source: str) -> str:
    """The seed's one-line summary: its first comment line, if it starts with one."""
    for line in source.splitlines():
        text = line.strip()
        if text.startswith("#!"):
            continue
        if text.startswith(("#", "//")):
            return "seed: " + text.lstrip("#/ ").strip()[:100]
        if text:
            break
    return "the starting kernel"


def after_seed(state: RunState) -> str:
    return "end" if state.get("stop_reason") else "select"


def select(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    generation = state["generation"]
    population = [ctx.kernel_view(k) for k in ctx.population()]
    directives = ctx.archive.directives()
    ctx.progress.event("generation", generation=generation, step="select")
    outcome = ctx.memo_outcome(
        f"g{generation}/select", Selection,
        lambda: ctx.selector.select(ctx.view, population, directives, verified=verified_ratios(ctx),
                                    findings=selector_findings(ctx, population)),
    )
    if outcome.error and outcome.by == "fallback" and ctx.llm_enabled:
        log.warning("generation %d: %s", generation, outcome.error)
    selection = outcome.value.model_dump() | {"by": outcome.by}
    ctx.progress.event("selected", generation=generation, **selection)
    return {"selection": selection, "generation_started": time.time()}


# How many side-by-side ratios and findings the Selector reads: the latest, one line each.
SELECTOR_RATIOS = 6
SELECTOR_FINDINGS = 4


def verified_ratios(ctx: RunContext, limit: int = SELECTOR_RATIOS) -> str:
    """The pairs of kernels the run timed side by side (a leader beside the best, a candidate beside
    its base), the latest measurement of each pair, newest last: `- k5 against k3: 1.21x [1.15–1.27],
    faster` ('' when none)."""
    pairs: dict[tuple[str, str], str] = {}
    measured = [v.model_dump(mode="json") for v in verify.verifications(ctx.archive)]
    measured += [m for m in (ctx.archive.get_step(f"{e.id}/side-by-side") for e in ctx.archive.experiments()) if m]
    for m in measured:
        if not m.get("ratio") or not m.get("ratio_ci") or not m.get("kernel_id") or not m.get("base_id"):
            continue
        key = (str(m["kernel_id"]), str(m["base_id"]))
        pairs.pop(key, None)
        lo, hi = m["ratio_ci"]
        pairs[key] = (f"- {key[0]} against {key[1]}: {num(m['ratio'])}x [{num(lo)}–{num(hi)}], "
                      f"{m.get('difference') or 'not measured'}")
    return "\n".join(list(pairs.values())[-limit:])


def selector_findings(ctx: RunContext, population: list[KernelView | None], limit: int = SELECTOR_FINDINGS) -> str:
    """A few findings of the run for the Selector, one line each: those of the experiments that made
    the three fastest kernels, then the newest others ('' when none)."""
    findings = ctx.archive.findings()  # newest first
    leaders = [k.id for k in sorted((k for k in population if k is not None and k.ok),
                                    key=lambda k: k.geomean_us or 0.0)[:3]]
    chosen = [f for kid in leaders for f in findings if f.get("kernel_id") == kid][:limit]
    chosen += [f for f in findings if f not in chosen][: max(0, limit - len(chosen))]
    return "\n".join(finding_line(f) for f in chosen)


def research(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    generation = state["generation"]
    selection = state["selection"]
    entries = ctx.memo_value(f"g{generation}/research", lambda: _design(ctx, generation, selection))
    specs: list[ExperimentSpec] = []
    for idx, entry in enumerate(entries):
        specs.append(
            ExperimentSpec(
                id=f"g{generation}e{idx}",
                generation=generation,
                idx=idx,
                kind=entry["kind"],
                plan=entry["plan"],
                assignment=entry.get("assignment"),
                base_id=selection["base_id"],
                reference_id=selection.get("reference_id"),
            )
        )
    ctx.progress.event("planned", generation=generation, plans=[s["plan"]["title"] for s in specs])
    return {"plans": specs}


def _design(ctx: RunContext, generation: int, selection: dict[str, Any]) -> list[dict[str, Any]]:
    """This generation's experiments: the Researcher's picks plus Tuner variants; the Tuner alone
    when there is no LLM or the Researcher's reply was unusable."""
    config = ctx.config
    population = ctx.population()
    base = ctx.archive.kernel(selection["base_id"])
    assert base is not None
    entries: list[dict[str, Any]] = []
    directives = ctx.archive.directives()
    findings = ctx.archive.findings()
    # The Tuner's variants are known before the Researcher runs (nearest untried values first): the
    # Researcher is told them, so that no plan spends an experiment on an assignment the Tuner tries.
    tuned = tune_plans(base, population, config.tuner_per_generation, directives, findings) if ctx.llm_enabled else []
    if ctx.llm_enabled:
        reference = ctx.archive.kernel(selection["reference_id"]) if selection.get("reference_id") else None
        base_view = ctx.kernel_view(base)
        assert base_view is not None
        kb = ctx.knowledge() if ctx.knowledge else None
        context = literature_context(kb, ctx.view, base_view, directives, ctx.run_id) if kb is not None else ""
        outcome = ctx.memo_outcome(
            f"g{generation}/researcher",
            ResearchPlan,
            lambda: ctx.researcher.design(
                ctx.view, base_view, ctx.kernel_view(reference), context, directives, picks=config.parallel,
                base_report=kernel_report(ctx, base), tuner=tuner_text(tuned),
            ),
        )
        if outcome.error:
            log.warning("%s", outcome.error)
        entries += [{"kind": "llm", "plan": p.model_dump()} for p in outcome.value.plans]
    tuner_slots = config.tuner_per_generation if entries else config.parallel
    if not entries:  # the Tuner alone (no LLM, or no usable plan): every slot is its
        tuned = tune_plans(base, population, tuner_slots, directives, findings)
    if len(tuned) < tuner_slots:
        # Said, not silent: a generation with fewer experiments than slots.
        frozen = frozen_reasons(base, population, directives, findings)
        why = (f"{base.id} declares no tunables" if "@tunable" not in base.source else
               "no untried values left" + (f" for the tunables not frozen ({', '.join(sorted(frozen))} frozen)"
                                           if frozen else ""))
        log.info("generation %d: the Tuner proposes %d of %d experiments (%s)", generation, len(tuned), tuner_slots,
                 why)
    entries += [{"kind": "tune", **p} for p in tuned]
    return entries


def tuner_text(tuned: list[dict[str, Any]]) -> str:
    """The Tuner's variants of this generation in one line, for the Researcher ('' when none)."""
    changes = [str(p["plan"]["title"]).removeprefix("tune ") for p in tuned]
    return "; ".join(changes)


# How much of a literature excerpt the Researcher reads, by rank: the best match up to 1,000
# characters, the second 700, the others 500; whole points, the rest marked [...]. Three excerpts at
# the knowledge base's 1,500 each were the largest block of its prompt after the base's code, and
# their later points (unaligned loads, tail handling, prefetching) are what a strong model knows.
EXCERPT_CHARS = (1000, 700, 500)
CUT = "\n[...]"
# Where an excerpt may end: before a list item or a paragraph, so that no point is cut mid-sentence.
_POINT = re.compile(r"\n(?=[-*] |\d+\. |\n)")


def excerpt(text: str, max_chars: int) -> str:
    """`text` up to `max_chars`, ending after a whole point (list item or paragraph) where one ends in
    its second half, else at a whole line; marked [...] where something was left out. A later point
    of a primer section is often an earlier excerpt's point again (a vectorised exp in the roofline's
    section and in the SIMD section), and a point cut mid-sentence reads as a different claim."""
    if len(text) <= max_chars:
        return text
    ends = [m.start() for m in _POINT.finditer(text, 0, max_chars + 1) if m.start() > max_chars // 2]
    cut = ends[-1] if ends else text.rfind("\n", 0, max_chars)
    return text[: cut if cut > max_chars // 2 else max_chars].rstrip() + CUT


def literature_context(kb: Any, view: ProblemView, base: KernelView, directives: list[str],
                       run_id: str | None = None) -> str:
    """The Researcher's literature and findings: asked with the plan that made the base and the
    measured bottleneck, filtered to the target's documents, above the relevance floor ('' when
    retrieval fails: it is an aid, the Researcher can work without it). Findings of run `run_id` are
    cited by their experiment ids (g1e0), other runs' with a tag of their run."""
    query = research_query(view, base, directives)
    log.info("literature query: %s", query)
    try:
        context = kb.research_context(
            query, target=KNOWLEDGE_TAG.get(view.target), problem=view.name, findings_target=view.target
        )
        if getattr(context, "literature", None):
            context.literature = [
                hit.model_copy(update={"text": excerpt(hit.text, EXCERPT_CHARS[min(rank, len(EXCERPT_CHARS) - 1)])})
                for rank, hit in enumerate(context.literature)
            ]
        text = str(context.to_prompt(max_chars_per_hit=max(EXCERPT_CHARS) + len(CUT), run_id=run_id))
    except Exception as exc:
        log.warning("knowledge retrieval failed: %s", exc)
        return ""
    # The findings are this problem's on this target (filtered above): the prompt says both already.
    return text.replace(f", problem {view.name}, target {view.target}\n", "\n").removesuffix(
        f", problem {view.name}, target {view.target}")


def fan_out(state: RunState) -> list[Send] | str:
    plans = state.get("plans") or []
    if not plans:
        return "collect"
    # Each experiment knows the Tuner variants beside it: a Coder's candidate equal to one is recognised
    # before review even while that variant is still being evaluated (graph/experiment.py's sibling_twin).
    tuned = [{"id": s["id"], "assignment": s.get("assignment"), "title": s["plan"].get("title", "")}
             for s in plans if s.get("kind") == "tune" and s.get("assignment")]
    return [Send("experiment", dict(spec, tuned_siblings=[t for t in tuned if t["id"] != spec["id"]]))
            for spec in plans]


def experiment(spec: ExperimentSpec, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Everything of one experiment but its explanation: candidate, review, evaluation, repairs, the
    side-by-side timing. The explanations wait for the whole generation (`explain`)."""
    ctx = runtime.context
    try:
        result = measure_experiment(ctx, spec)
    except Exception as exc:
        # One broken experiment must not end a run of hours; the error is kept with it.
        log.exception("experiment %s failed", spec["id"])
        ctx.archive.update_experiment(spec["id"], status="error", step=f"error: {exc}"[:500])
        result = {
            "experiment_id": spec["id"],
            "generation": spec["generation"],
            "kind": spec["kind"],
            "status": "error",
            "kernel_id": None,
            "geomean_us": None,
        }
    return {"results": [result]}


def measured(state: RunState) -> dict[str, Any]:
    """Where the generation's experiments join: every one is measured before any is explained."""
    return {}


def fan_out_explain(state: RunState) -> list[Send] | str:
    plans = state.get("plans") or []
    return [Send("explain", spec) for spec in plans] or "collect"


def explain(spec: ExperimentSpec, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The Critic's finding for one experiment, its siblings' outcomes measured and final."""
    ctx = runtime.context
    try:
        explain_experiment(ctx, spec)
    except Exception as exc:
        log.exception("explaining experiment %s failed", spec["id"])
        ctx.archive.update_experiment(spec["id"], status="done", step=f"explanation failed: {exc}"[:500],
                                      finished_at=utc_now())
    return {}


def verified_best(ctx: RunContext, best_id: str | None) -> KernelRecord | None:
    """The leaderboard's top when it is the run's best already, or when a side-by-side timing against
    that best confirms it is faster (graph/verify.py); otherwise the best stays. A best that failed as the
    pair's base is evaluated again alone: where it fails there too it is no yardstick, and leaves the
    leaderboard; the best crowned before it (or, before any, the leaderboard's top) is then the yardstick."""
    leader = ctx.archive.best()
    current = ctx.archive.kernel(best_id) if best_id else None
    if leader is None or current is None or leader.id == current.id or not current.ok or not ctx.config.sandbox.verify_wins:
        return leader
    measured_before = verify.settled(ctx.archive, leader, current) is not None
    check = _side_by_side(ctx, leader, current)
    if check.confirmed:
        return leader
    # Only as the pair is measured (at most UNMEASURED_TRIES times), not each generation its old answer is read.
    if check.base_failed and not measured_before and _demoted(ctx, current):
        return verified_best(ctx, _crowned_before(ctx, current))
    return current


def _demoted(ctx: RunContext, kernel: KernelRecord) -> bool:
    """The kernel evaluated again alone, in a fresh judge; where that verdict is not `ok` the kernel leaves the
    leaderboard (True). A best that fails whenever it is a challenger's base (a race that loses now and then, or a
    kernel that behaves only when timed alone) would otherwise keep every challenger unmeasured, and its place."""
    ctx.progress.event("verify", kernel=kernel.id, step=f"evaluating {kernel.id} again alone: it failed as a base")
    verdict = ctx.evaluator.verify(kernel)
    if verdict.passed:
        return False
    message = f"evaluated again alone after it failed as a challenger's base: {verdict.status.value}: {verdict.message}"
    ctx.archive.demote(kernel.id, verdict.status.value, message[:2000])
    log.warning("%s left the leaderboard: %s", kernel.id, message[:300])
    return True


def _crowned_before(ctx: RunContext, kernel: KernelRecord) -> str | None:
    """The latest best the run crowned, other than `kernel`, that is still on the leaderboard."""
    for generation in reversed(ctx.archive.generations()):
        crowned = ctx.archive.kernel(generation["best_id"]) if generation.get("best_id") else None
        if crowned is not None and crowned.id != kernel.id and crowned.ok:
            return crowned.id
    return None


def _side_by_side(ctx: RunContext, kernel: KernelRecord, base: KernelRecord) -> verify.Verification:
    """The pair's measurement: the one that stands (`verify.settled`), or a new one (recorded in the archive)."""
    check = verify.settled(ctx.archive, kernel, base)
    if check is None:
        ctx.progress.event("verify", kernel=kernel.id, step=f"timing {kernel.id} beside {base.id}")
        check = verify.combine([verify.from_verdict(ctx.evaluator.verify(kernel, base), kernel, base, str(ctx.run_dir))
                                for _ in range(verify.TRIALS)])
        verify.record(ctx.archive, check)
        log.info("side by side: %s", check.describe())
        ctx.progress.event("verified", kernel=kernel.id, base=base.id, ratio=check.ratio, difference=check.difference)
    return check


def collect(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    generation = state["generation"]
    results = [r for r in state.get("results", []) if r.get("generation") == generation]
    best = verified_best(ctx, state.get("best_id"))
    previous = state.get("best_geomean_us")
    improved = best is not None and (previous is None or best.geomean_us < previous * (1 - MIN_IMPROVEMENT))
    stale = 0 if improved else state.get("stale", 0) + 1
    now = time.time()
    elapsed = state.get("elapsed_s", 0.0) + now - max(state.get("generation_started", now), ctx.session_started)
    spend = ctx.archive.spend()
    selection = state.get("selection", {})
    ctx.archive.finish_generation(
        generation,
        base_id=selection.get("base_id"),
        reference_id=selection.get("reference_id"),
        best_id=best.id if best else None,
        best_geomean_us=best.geomean_us if best else None,
        experiments=len(results),
        results=results,
        improved=improved,
        tokens=spend.tokens,
        cost_usd=spend.cost_usd,
    )
    stop = _stop_reason(ctx, generation, stale, elapsed, spend.tokens, spend.cost_usd, results)
    stop = control.at_boundary(ctx, stop)  # a pause or stop asked for from a chat or another process
    seed_kernel = ctx.archive.seed()
    if stop and best is not None and seed_kernel is not None and best.id != seed_kernel.id and ctx.config.sandbox.verify_wins:
        _side_by_side(ctx, best, seed_kernel)  # the run's headline: its best against the seed, side by side
    ctx.progress.event(
        "generation_done",
        generation=generation,
        best=best.id if best else None,
        best_geomean_us=best.geomean_us if best else None,
        improved=improved,
        stop_reason=stop,
    )
    return {
        "generation": generation + 1,
        "best_id": best.id if best else state.get("best_id"),
        "best_geomean_us": best.geomean_us if improved and best else previous,
        "stale": stale,
        "elapsed_s": elapsed,
        "stop_reason": stop,
        "plans": [],
    }


def _stop_reason(
    ctx: RunContext,
    generation: int,
    stale: int,
    elapsed: float,
    tokens: int,
    cost: float,
    results: list[dict[str, Any]],
) -> str | None:
    budgets = ctx.config.budgets
    if ctx.stop.is_set():
        return "stopped on request"
    if not results and not ctx.llm_enabled:
        return "the Tuner has no untried values left (no LLM configured)"
    if generation >= budgets.generations:
        return f"generation budget reached ({budgets.generations})"
    if budgets.wall_time_s is not None and elapsed >= budgets.wall_time_s:
        return f"wall-time budget reached ({elapsed:.0f} s of {budgets.wall_time_s:.0f} s)"
    if budgets.max_tokens is not None and tokens >= budgets.max_tokens:
        return f"token budget reached ({tokens} of {budgets.max_tokens})"
    if budgets.max_cost_usd is not None and cost >= budgets.max_cost_usd:
        return f"cost budget reached (${cost:.4f} of ${budgets.max_cost_usd:.4f})"
    if budgets.patience is not None and stale >= budgets.patience:
        return f"no improvement for {stale} generations"
    return None


def after_collect(state: RunState) -> str:
    return "end" if state.get("stop_reason") else "select"
