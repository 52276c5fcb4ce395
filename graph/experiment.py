"""One experiment: write (or render) a candidate, review it, evaluate it, repair it, explain it.

Every finished step is stored in the archive under the experiment's id, so an experiment cut
off by a kill picks up after its last finished step when the run resumes.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from agents.coder import Candidate
from agents.critic import Critic, RunOutcome, SideBySide
from agents.schemas import ExperimentPlan, Explanation, Review
from agents.views import KernelView, source_diff
from graph.archive import ExperimentRecord, KernelRecord, utc_now
from graph.context import RunContext
from graph.resource_report import source_resource_report
from graph.state import ExperimentResult, ExperimentSpec
from graph.tuner import render_variant
from sandbox.integrity import scan_source
from sandbox.static_report import StaticReport
from sandbox.summary import num, unpaired_ratio

log = logging.getLogger(__name__)


def unified_diff(before: str, after: str, limit: int = 6000) -> str:
    return source_diff(before, after, ("base", "candidate"), limit)


_PREPROCESSOR = re.compile(r"#\s*(include|define|undef|if|ifdef|ifndef|elif|else|endif|pragma|error|line)\b")


def normalised_source(source: str) -> str:
    """The source without blank lines, trailing spaces and comment-only lines: two candidates equal
    here compute the same thing, so the second need not be reviewed, built or timed."""
    lines = []
    for line in source.splitlines():
        text = line.rstrip()
        stripped = text.strip()
        if not stripped or stripped.startswith("//") or (stripped.startswith("#") and not _PREPROCESSOR.match(stripped)):
            continue
        lines.append(text)
    return "\n".join(lines)


def evaluated_twin(ctx: RunContext, source: str, experiment_id: str) -> KernelRecord | None:
    """A kernel of the run (not of this experiment, which a resumed run evaluated already) whose
    normalised source equals `source`'s."""
    wanted = normalised_source(source)
    return next((k for k in ctx.population() if k.experiment_id != experiment_id
                 and normalised_source(k.source) == wanted), None)


def sibling_twin(spec: ExperimentSpec, base: KernelRecord, source: str) -> KernelRecord | None:
    """A Tuner variant of this generation, perhaps still being evaluated, whose normalised source equals
    `source`'s: a plan that sets a tunable to the value the Tuner tries beside it (EXP_UNROLL=4 twice)
    would be reviewed, built and timed twice. Returned as a stand-in under the sibling's experiment id,
    status `pending` (graph/experiment.py's resolve_twin reads it as the kernel it made)."""
    wanted = normalised_source(source)
    for sibling in spec.get("tuned_siblings") or []:
        if sibling.get("id") == spec["id"] or not sibling.get("assignment"):
            continue
        try:
            rendered = render_variant(base.source, sibling["assignment"])
        except Exception:  # a variant the Tuner cannot render is no twin
            continue
        if normalised_source(rendered) == wanted:
            return KernelRecord(id=sibling["id"], generation=spec["generation"], experiment_id=sibling["id"],
                                origin="tune", summary=str(sibling.get("title") or ""), source=rendered, sha256="",
                                status="pending")
    return None


def duplicate_feedback(twin: KernelRecord) -> str:
    """What the Coder is told when its candidate is a kernel the run already has."""
    if twin.status == "pending":
        return (f"Your candidate has the same code as the Tuner's experiment {twin.id} of this generation "
                f"({twin.summary or 'a tunable assignment'}), which is being evaluated now. Implement the plan so "
                "that it differs from that variant: change the code, not only a tunable's value.")
    result = f"{num(twin.geomean_us)} µs" if twin.geomean_us else twin.status
    return (f"Your candidate has the same code as kernel {twin.id} ({twin.summary or twin.origin}; {result}), "
            f"which the run has already evaluated. Implement the plan so that it differs from {twin.id}.")


def integrity_scan(ctx: RunContext, source: str) -> list[dict[str, Any]]:
    return [f.to_dict() for f in scan_source(source, ctx.integrity_policy)]


def resource_report(ctx: RunContext, source: str) -> str:
    """The static report: registers, memory and occupancy for a GPU target, which loops the compiler
    vectorised for the CPU; '' where there is no native source, or on error."""
    return source_resource_report(source, ctx.config.target, ctx.run_dir / "kernels")


def _finish(ctx: RunContext, spec: ExperimentSpec, kernel: KernelRecord | None, status: str) -> ExperimentResult:
    ctx.archive.update_experiment(
        spec["id"], status="done", step="done", kernel_id=kernel.id if kernel else None, finished_at=utc_now()
    )
    ctx.progress.event(
        "experiment_done",
        experiment=spec["id"],
        status=status,
        kernel=kernel.id if kernel else None,
        geomean_us=kernel.geomean_us if kernel else None,
    )
    return _result(spec, kernel, status)


def _step(ctx: RunContext, spec: ExperimentSpec, step: str) -> None:
    ctx.archive.update_experiment(spec["id"], step=step)
    ctx.progress.event("experiment_step", experiment=spec["id"], step=step, title=spec["plan"].get("title", ""))


def _result(spec: ExperimentSpec, kernel: KernelRecord | None, status: str) -> ExperimentResult:
    return ExperimentResult(
        experiment_id=spec["id"],
        generation=spec["generation"],
        kind=spec["kind"],
        status=status,
        kernel_id=kernel.id if kernel else None,
        geomean_us=kernel.geomean_us if kernel else None,
    )


def run_experiment(ctx: RunContext, spec: ExperimentSpec) -> ExperimentResult:
    """One experiment alone, measured then explained. The graph runs the two halves apart
    (`measure_experiment` for every experiment of a generation, then `explain_experiment`), so that
    the Critic explains each with its siblings' outcomes measured."""
    result = measure_experiment(ctx, spec)
    explain_experiment(ctx, spec)
    return result


def measure_experiment(ctx: RunContext, spec: ExperimentSpec) -> ExperimentResult:
    """Write (or render) the candidate, review it, evaluate it, repair it, and where its timing claims
    a difference time it beside its base: everything but the explanation. The experiment is then
    `measured`, with its kernel; what came out is kept under `<id>/measured` for the explanation."""
    record = ctx.archive.start_experiment(
        ExperimentRecord(
            id=spec["id"],
            generation=spec["generation"],
            idx=spec["idx"],
            kind=spec["kind"],
            plan=dict(spec["plan"], assignment=spec.get("assignment")),
            base_id=spec["base_id"],
            reference_id=spec.get("reference_id"),
            status="running",
            started_at=utc_now(),
        )
    )
    stored = ctx.archive.get_step(f"{spec['id']}/measured")
    if record.status == "done" or stored is not None:  # measured before a restart
        kernel_id = stored["kernel_id"] if stored is not None else record.kernel_id
        kernel = ctx.archive.kernel(kernel_id) if kernel_id else None
        if record.status not in ("done", "measured"):
            ctx.archive.update_experiment(spec["id"], status="measured", step="measured", kernel_id=kernel_id)
        return _result(spec, kernel, (stored or {}).get("status") or (kernel.status if kernel else "failed"))
    base = ctx.archive.kernel(spec["base_id"])
    if base is None:
        raise KeyError(f"experiment {spec['id']}: base kernel {spec['base_id']} is not in the archive")
    reference = ctx.archive.kernel(spec["reference_id"]) if spec.get("reference_id") else None
    plan = ExperimentPlan.model_validate(spec["plan"])
    twin = None
    if spec["kind"] == "tune":
        kernel = _tune(ctx, spec, base, plan)
    else:
        kernel, twin = _write_and_repair(ctx, spec, base, reference, plan)
    if kernel is not None and twin is None:
        side_by_side(ctx, spec, kernel, base)  # kept under <id>/side-by-side: siblings' explanations read it
    status = kernel.status if kernel else "duplicate" if twin else "failed"
    ctx.archive.put_step(f"{spec['id']}/measured", {
        "kernel_id": kernel.id if kernel else None, "twin_id": twin.id if twin else None, "status": status})
    ctx.archive.update_experiment(spec["id"], status="measured", step="measured",
                                  kernel_id=kernel.id if kernel else None)
    ctx.progress.event("experiment_step", experiment=spec["id"], step="measured", title=spec["plan"].get("title", ""))
    return _result(spec, kernel, status)


def explain_experiment(ctx: RunContext, spec: ExperimentSpec) -> None:
    """The Critic's finding for a measured experiment, once every experiment of its generation is
    measured (the graph's `explain` node): the siblings' outcomes are final when it reads them."""
    record = ctx.archive.experiment(spec["id"])
    measured = ctx.archive.get_step(f"{spec['id']}/measured")
    if record is None or record.status in ("done", "error") or measured is None:
        return
    base = ctx.archive.kernel(spec["base_id"])
    assert base is not None
    kernel = ctx.archive.kernel(measured["kernel_id"]) if measured.get("kernel_id") else None
    twin = resolve_twin(ctx, measured.get("twin_id"))
    _explain(ctx, spec, ExperimentPlan.model_validate(spec["plan"]), base, kernel, twin)
    _finish(ctx, spec, kernel, str(measured.get("status") or "failed"))


def resolve_twin(ctx: RunContext, twin_id: str | None) -> KernelRecord | None:
    """The kernel a candidate duplicated: a kernel id, or a sibling experiment's id (a Tuner variant
    of the same generation that was being evaluated) read as the kernel that experiment made."""
    if not twin_id:
        return None
    kernel = ctx.archive.kernel(twin_id)
    if kernel is not None:
        return kernel
    sibling = ctx.archive.experiment(twin_id)
    made = ctx.archive.kernel(sibling.kernel_id) if sibling is not None and sibling.kernel_id else None
    return made or KernelRecord(id=twin_id, generation=0, origin="tune", summary="", source="", sha256="",
                                status="not measured", experiment_id=twin_id)


def _lineage(
    spec: ExperimentSpec, base: KernelRecord, origin: str, attempt: int, summary: str, plan: ExperimentPlan
) -> KernelRecord:
    # The reference is a parent only of a kernel whose Coder was shown it (a plan that uses it).
    uses_reference = origin == "llm" and plan.uses_reference
    parents = [base.id] + ([spec["reference_id"]] if spec.get("reference_id") and uses_reference else [])
    return KernelRecord(
        id="",
        generation=spec["generation"],
        experiment_id=spec["id"],
        attempt=attempt,
        origin=origin,
        parents=parents,
        plan=dict(plan.model_dump(), assignment=spec.get("assignment")),
        summary=summary,
        source="",
        sha256="",
        status="pending",
    )


def _evaluate(ctx: RunContext, spec: ExperimentSpec, source: str, record: KernelRecord) -> KernelRecord:
    stored = next((k for k in ctx.archive.experiment_kernels(spec["id"]) if k.attempt == record.attempt), None)
    if stored is not None:
        return stored  # evaluated before a restart

    def on_event(event: dict[str, Any]) -> None:
        if "phase" in event:
            ctx.progress.event(
                "experiment_step",
                experiment=spec["id"],
                step=f"sandbox: {event['phase']}",
                title=spec["plan"].get("title", ""),
            )

    _step(ctx, spec, f"evaluate (attempt {record.attempt + 1})")
    return ctx.evaluator.evaluate(source, record, on_event)


def _tune(ctx: RunContext, spec: ExperimentSpec, base: KernelRecord, plan: ExperimentPlan) -> KernelRecord:
    source = render_variant(base.source, spec.get("assignment") or {})
    summary = f"{plan.title} (of {base.id})"
    return _evaluate(ctx, spec, source, _lineage(spec, base, "tune", 0, summary, plan))


def _write_and_repair(
    ctx: RunContext, spec: ExperimentSpec, base: KernelRecord, reference: KernelRecord | None, plan: ExperimentPlan
) -> tuple[KernelRecord | None, KernelRecord | None]:
    """Coder, Critic review (one send-back), evaluation; on a failure, the diagnostics go back to
    the Coder, a bounded number of times. A candidate the run has evaluated already is sent back
    before review, naming the kernel it duplicates. Returns the last kernel evaluated (None: none
    came out) and, when the last candidate duplicated one, that kernel."""
    assert ctx.coder is not None
    base_view = ctx.kernel_view(base)
    ref_view = ctx.kernel_view(reference)
    feedback, edit_target = "", None
    sendbacks = 0
    kernel: KernelRecord | None = None
    twin: KernelRecord | None = None
    eid = spec["id"]
    for attempt in range(ctx.config.coder_attempts):
        revision = 0
        twin = None
        while True:
            key = f"{eid}/coder/{attempt}/{revision}"
            _step(ctx, spec, f"coder (attempt {attempt + 1})")
            written = ctx.memo_value(
                key,
                lambda fb=feedback, et=edit_target: vars(ctx.coder.write(ctx.view, plan, base_view, ref_view, fb, et)),
            )
            candidate = Candidate(**written)
            if candidate.source is None:
                break
            twin = evaluated_twin(ctx, candidate.source, eid) or sibling_twin(spec, base, candidate.source)
            if twin is not None:
                break
            _step(ctx, spec, "critic review")
            review = ctx.memo_outcome(
                f"{eid}/review/{attempt}/{revision}",
                Review,
                lambda src=candidate.source: ctx.critic.review(
                    plan, src, integrity_scan(ctx, src), resource_report(ctx, src), ctx.view, base_view
                ),
            ).value
            if review.approve or sendbacks >= ctx.config.critic_sendbacks:
                break
            sendbacks += 1
            revision += 1
            feedback = "The reviewer sent your candidate back:\n" + "\n".join(f"- {i}" for i in review.issues)
            if review.advice:
                feedback += f"\nAdvice: {review.advice}"
            edit_target = candidate.source
        if twin is not None:
            _step(ctx, spec, f"duplicate of {twin.id}")
            feedback, edit_target = duplicate_feedback(twin), None
            continue
        if candidate.source is None:
            log.info("%s attempt %d: no candidate: %s", eid, attempt + 1, candidate.error)
            feedback = f"Your previous reply could not be used: {candidate.error}. Reply again, following the format."
            continue
        kernel = _evaluate(ctx, spec, candidate.source, _lineage(spec, base, "llm", attempt, candidate.summary, plan))
        if kernel.ok:
            return kernel, None
        feedback = f"Your previous candidate failed in the sandbox. Fix it; keep the plan.\n{kernel.message}"
        edit_target = candidate.source
    return kernel, twin


def _explain(
    ctx: RunContext,
    spec: ExperimentSpec,
    plan: ExperimentPlan,
    base: KernelRecord,
    kernel: KernelRecord | None,
    twin: KernelRecord | None = None,
) -> None:
    # Without a model the finding is written from the figures alone: no Critic to name.
    _step(ctx, spec, "critic explain" if ctx.critic.llm is not None else "finding")
    base_view = ctx.kernel_view(base)
    assert base_view is not None
    candidate_view: KernelView | None
    if kernel is None and twin is not None:
        # Nothing new ran: the finding says which kernel the plan duplicates, without a model call.
        candidate_view = base_view.model_copy(update={
            "id": "-", "status": "duplicate", "geomean_us": None, "benchmarks": {},
            "message": f"the candidate has the same code as {twin.id}, already evaluated"})
        diff = ""
    elif kernel is None:
        failures = [ctx.archive.get_step(f"{spec['id']}/coder/{a}/0") for a in range(ctx.config.coder_attempts)]
        reason = "; ".join(str(f.get("error")) for f in failures if f and f.get("error")) or "no candidate"
        candidate_view = base_view.model_copy(
            update={"id": "-", "status": "no_candidate", "message": reason, "geomean_us": None, "benchmarks": {}}
        )
        diff = ""
    else:
        candidate_view = ctx.kernel_view(kernel)
        diff = unified_diff(base.source, kernel.source)
    assert candidate_view is not None
    outcome = RunOutcome(
        candidate=candidate_view,
        base=base_view,
        errors=candidate_view.message,
        paired=side_by_side(ctx, spec, kernel, base) if kernel is not None and twin is None else None,
        resources=kernel_report(ctx, kernel) if kernel else "",
        diff=diff,
    )
    siblings = sibling_outcomes(ctx, spec)
    critic = ctx.critic if twin is None or kernel is not None else Critic(None)
    explanation = ctx.memo_outcome(
        f"{spec['id']}/explain", Explanation, lambda: critic.explain(plan, outcome, ctx.view, siblings)
    )
    finding = {
        "experiment_id": spec["id"],
        "kernel_id": kernel.id if kernel else None,
        "duplicate_of": twin.id if twin is not None and kernel is None else None,
        "parent_id": base.id,
        "kind": spec["kind"],
        "title": plan.title,
        "hypothesis": explanation.value.hypothesis,
        "change": explanation.value.change,
        "explanation": explanation.value.explanation,
        "lesson": explanation.value.lesson,
        "expected_speedup_min": plan.est_min_speedup,
        "expected_speedup_max": plan.est_max_speedup,
        "measured_speedup": outcome.speedup,
        "status": candidate_view.status,
        "by": explanation.by,
    }
    ctx.archive.add_finding(spec["id"], finding["kernel_id"], finding)
    ctx.archive.update_experiment(spec["id"], finding=finding)
    kb = ctx.knowledge() if ctx.knowledge else None
    if kb is not None and spec["kind"] != "tune":
        _remember(ctx, kb, finding)


def _remember(ctx: RunContext, kb: Any, finding: dict[str, Any]) -> None:
    from knowledge import Finding

    try:
        kb.add_finding(
            Finding(
                # Short and stable within the run (g1e0); the store keys it with the run (Finding.store_key).
                id=finding["experiment_id"],
                run_id=ctx.run_id,
                hypothesis=finding["hypothesis"],
                change=finding["change"],
                expected_speedup_min=finding["expected_speedup_min"],
                expected_speedup_max=finding["expected_speedup_max"],
                measured_speedup=finding["measured_speedup"],
                explanation=finding["explanation"],
                lesson=finding["lesson"],
                kernel_id=finding["kernel_id"] or "-",
                parent_id=finding["parent_id"],
                problem=ctx.view.name,
                target=ctx.config.target,
                status=finding["status"],
            )
        )
    except Exception as exc:  # the archive holds the finding; the memory is a copy for retrieval
        log.warning("could not store finding %s in the knowledge base: %s", finding["experiment_id"], exc)


def side_by_side(ctx: RunContext, spec: ExperimentSpec, kernel: KernelRecord, base: KernelRecord) -> SideBySide | None:
    """The candidate timed again beside its base (a fresh judge, alternating rounds on the same
    inputs), where the two separate timings claim a difference: a finding is a lesson for every
    later generation, and two timings taken minutes apart on a shared host can be off by a factor
    (a relay run read 7.36x apart, 3.52x side by side). Kept with the experiment, so a resumed run
    does not measure it again. None where the two timings show no difference, or the pair could
    not be measured."""
    if not ctx.config.paired_findings or spec["kind"] == "tune" or not kernel.ok or not base.ok or kernel.id == base.id:
        return None
    apart = RunOutcome(candidate=ctx.kernel_view(kernel), base=ctx.kernel_view(base))  # type: ignore[arg-type]
    if apart.difference not in ("faster", "slower"):
        return None
    if ctx.archive.get_step(f"{spec['id']}/side-by-side") is None:
        _step(ctx, spec, "side by side with the base")

    def measure() -> dict[str, Any]:
        from graph.verify import from_verdict

        verification = from_verdict(ctx.evaluator.verify(kernel, base), kernel, base, str(ctx.run_dir))
        return verification.model_dump(mode="json")

    stored = ctx.memo_value(f"{spec['id']}/side-by-side", measure)
    ratio, ci = stored.get("ratio"), stored.get("ratio_ci")
    if ratio is None or ci is None:
        log.info("%s: not measured side by side: %s", spec["id"], stored.get("reason") or stored.get("status"))
        return None
    shapes = {str(sh["shape"]): (float(sh["ratio"]), float(sh["ratio_ci"][0]), float(sh["ratio_ci"][1]))
              for sh in stored.get("shapes") or [] if sh.get("ratio") and sh.get("ratio_ci")}
    return SideBySide(float(ratio), (float(ci[0]), float(ci[1])), str(stored.get("difference")), shapes)


def kernel_report(ctx: RunContext, kernel: KernelRecord) -> str:
    """A kept kernel's static report as the roles read it: its verdict's (a GPU target's registers,
    spills, occupancy), or on the CPU the vectorisation report of its source ('' when neither)."""
    summary = _static_summary(ctx.archive.kernel_static(kernel.id))
    if summary or ctx.config.target != "cpu":
        return summary
    return resource_report(ctx, kernel.source)


def _static_summary(static: Any) -> str:
    """The verdict's static report as the Critic reads it ('' when the target has none)."""
    if not static:
        return ""
    try:
        return StaticReport.from_dict(static).summary()
    except (TypeError, KeyError) as exc:  # a report from an older schema: advice, not essential
        log.info("unreadable static report: %s", exc)
        return ""


def measured_ratio(ctx: RunContext, experiment_id: str, kernel: KernelRecord, base: KernelRecord | None) -> str:
    """The kernel's speed-up over its base as measured: side by side where the experiment timed the
    pair (its figure), else from the two separate timings, with its 95% interval and reading."""
    paired = ctx.archive.get_step(f"{experiment_id}/side-by-side")
    if paired and paired.get("ratio") and paired.get("ratio_ci"):
        lo, hi = paired["ratio_ci"]
        return (f"{num(paired['ratio'])}x [{num(lo)}–{num(hi)}] the base side by side, "
                f"{paired.get('difference') or 'not measured'}")
    if base is None:
        return ""
    compared = unpaired_ratio(base.geomean_us, base.geomean_ci_us, kernel.geomean_us, kernel.geomean_ci_us)
    if compared is None:
        return ""
    gain, interval, said = compared
    within = f" [{num(interval[0])}–{num(interval[1])}]" if interval else ""
    return f"{num(gain)}x{within} the base timed apart, {said}"


def sibling_outcomes(ctx: RunContext, spec: ExperimentSpec) -> str:
    """The other experiments of this generation, one line each with the outcome measured (the graph
    explains only once every experiment of a generation is measured): its kernel's time and speed-up
    over the shared base with its interval, side by side where it was timed so; its failure; the kernel
    it duplicated. So the Critic can answer a plan's question that a sibling's measurement settles
    ('' when alone)."""
    base = ctx.archive.kernel(spec["base_id"])
    lines = []
    for other in ctx.archive.experiments(spec["generation"]):
        if other.id == spec["id"]:
            continue
        head = f"- {other.id} ({other.kind}) {other.plan.get('title', '')}:"
        measured = ctx.archive.get_step(f"{other.id}/measured") or {}
        kernel_id = measured.get("kernel_id") or other.kernel_id
        kernel = ctx.archive.kernel(kernel_id) if kernel_id else None
        if other.status == "error":
            lines.append(f"{head} {other.step or 'error'}"[:300])
        elif kernel is None and measured.get("twin_id"):
            twin = resolve_twin(ctx, measured["twin_id"])
            lines.append(f"{head} not run, the same code as {twin.id if twin else measured['twin_id']}")
        elif kernel is None:
            lines.append(f"{head} {'no candidate' if measured or other.status == 'done' else 'not measured yet'}")
        elif not kernel.ok:
            message = " ".join(kernel.message.split())[:160]
            lines.append(f"{head} {kernel.id} {kernel.status}" + (f" ({message})" if message else ""))
        else:
            view = ctx.kernel_view(kernel)
            assert view is not None
            ratio = measured_ratio(ctx, other.id, kernel, base)
            lines.append(f"{head} {kernel.id} {view.time_text()}" + (f"; {ratio}" if ratio else ""))
    return "\n".join(lines)
