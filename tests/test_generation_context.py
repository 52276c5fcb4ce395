"""What the roles know of their generation (issue 15, from a run played by hand): the Critic explains
with every sibling measured, the Researcher knows the Tuner's variants beside its plans, the Selector
reads side-by-side ratios and findings, and findings carry short ids with their lesson apart."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agents.critic import Critic
from agents.llm import LLMConfig, RoleLLM
from agents.outcome import Outcome
from agents.researcher import Researcher
from agents.schemas import ExperimentPlan
from agents.scripted import ScriptedChatModel
from agents.selector import Selector
from agents.views import KernelView, ProblemView, finding_line
from graph.archive import Archive, ExperimentRecord, KernelRecord, sha256_text, utc_now
from graph.config import RunConfig
from knowledge.models import Finding, FindingHit, ResearchContext

TUNABLE = """#include <cmath>
// @tunable UNROLL: 1, 2, 4, 8
#define UNROLL 1
void f() { for (int i = 0; i < UNROLL; ++i) {} }
"""
VIEW = ProblemView(name="softmax", target="cpu", hardware="- CPU Test CPU", benchmark_shapes="s")


def scripted(role: str, reply: dict[str, Any]) -> tuple[RoleLLM, ScriptedChatModel]:
    model = ScriptedChatModel(script=[], default={"args": reply})
    return RoleLLM(role, model, LLMConfig(model="m", max_retries=0)), model


def kernel(archive: Archive, source: str, geo: float | None, *, status: str = "ok", experiment_id: str = "seed",
           ci: tuple[float, float] | None = None, message: str = "", origin: str = "llm") -> KernelRecord:
    return archive.add_kernel(KernelRecord(
        id="", generation=0 if experiment_id == "seed" else 1, experiment_id=experiment_id, origin=origin,
        summary=experiment_id, source=source, sha256=sha256_text(source), status=status, geomean_us=geo,
        geomean_ci_us=ci, message=message, benchmarks={"s": geo} if geo else {}))


def experiment(archive: Archive, eid: str, kind: str, title: str, base: str, status: str = "running") -> None:
    archive.start_experiment(ExperimentRecord(id=eid, generation=1, idx=int(eid[-1]), kind=kind,
                                              plan={"title": title}, base_id=base, status=status,
                                              started_at=utc_now()))


def fake_ctx(archive: Archive, **more: Any) -> Any:
    return SimpleNamespace(archive=archive, population=archive.kernels,
                           kernel_view=lambda r: None if r is None else KernelView.model_validate(r.model_dump()),
                           **more)


# -- 1. the Critic explains with its siblings measured ----------------------------------------------


def test_the_graph_measures_the_whole_generation_before_it_explains_any_experiment() -> None:
    from graph.build import build_graph

    edges = {(e.source, e.target) for e in build_graph().compile().get_graph().edges}
    assert ("experiment", "measured") in edges and ("measured", "explain") in edges
    assert ("explain", "collect") in edges and ("experiment", "collect") not in edges


def test_siblings_are_shown_with_their_final_outcomes_and_paired_ratios(tmp_path: Path) -> None:
    from graph.experiment import sibling_outcomes

    archive = Archive(tmp_path / "a.sqlite")
    base = kernel(archive, "base", 100.0, ci=(98.0, 102.0), origin="seed")
    for eid, kind, title in (("g1e0", "llm", "inline exp"), ("g1e1", "llm", "library exp"),
                             ("g1e2", "tune", "tune UNROLL 1→4"), ("g1e3", "llm", "intrinsics"),
                             ("g1e4", "llm", "same as the Tuner")):
        experiment(archive, eid, kind, title, base.id)
    fast = kernel(archive, "library", 80.0, ci=(79.0, 81.0), experiment_id="g1e1")
    tuned = kernel(archive, "tuned", 95.0, ci=(90.0, 100.0), experiment_id="g1e2", origin="tune")
    broken = kernel(archive, "intrinsics", None, status="build_error", experiment_id="g1e3",
                    message="kernel.cpp:3: error: '_mm256_exp_ps' was not declared")
    # What the experiment nodes leave behind once measured (graph/experiment.py's measure_experiment).
    archive.put_step("g1e1/side-by-side", {"kernel_id": fast.id, "base_id": base.id, "ratio": 1.24,
                                           "ratio_ci": [1.2, 1.28], "difference": "faster"})
    for eid, kid, twin, status in (("g1e1", fast.id, None, "ok"), ("g1e2", tuned.id, None, "ok"),
                                   ("g1e3", broken.id, None, "build_error"), ("g1e4", None, "g1e2", "duplicate")):
        archive.put_step(f"{eid}/measured", {"kernel_id": kid, "twin_id": twin, "status": status})
        archive.update_experiment(eid, status="measured", kernel_id=kid)

    text = sibling_outcomes(fake_ctx(archive), {"id": "g1e0", "generation": 1, "base_id": base.id})
    lines = text.splitlines()
    assert len(lines) == 4 and "g1e0" not in text
    assert "running" not in text and "not measured" not in text
    assert lines[0].startswith(f"- g1e1 (llm) library exp: {fast.id} 80.0 [79.0–81.0] µs")
    assert "1.24x [1.20–1.28] the base side by side, faster" in lines[0]  # the pair's own measurement
    assert "1.05x [0.98–1.13] the base timed apart, no measurable difference" in lines[1]
    assert f"{broken.id} build_error (kernel.cpp:3: error: '_mm256_exp_ps' was not declared)" in lines[2]
    # A duplicate of a Tuner variant still running is read as the kernel that variant made.
    assert lines[3] == f"- g1e4 (llm) same as the Tuner: not run, the same code as {tuned.id}"


def test_measured_experiments_show_their_kernel_and_are_done_once_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """measure_experiment leaves the experiment `measured` with its kernel (not `running`, which its
    siblings' explanations read); explain_experiment makes it `done` and hands the Critic the siblings."""
    from graph import experiment as exp

    archive = Archive(tmp_path / "a.sqlite")
    base = kernel(archive, "base", 100.0, ci=(98.0, 102.0), origin="seed")
    made: dict[str, KernelRecord] = {}

    def tune(ctx: Any, spec: Any, base_record: Any, plan: Any) -> KernelRecord:
        made[spec["id"]] = kernel(archive, spec["id"], 50.0 if spec["id"] == "g1e1" else 90.0, ci=(49.0, 51.0),
                                  experiment_id=spec["id"], origin="tune")
        return made[spec["id"]]

    monkeypatch.setattr(exp, "_tune", tune)
    monkeypatch.setattr(exp, "kernel_report", lambda ctx, k: "")
    llm, critic_model = scripted("critic", {"hypothesis": "h", "change": "c", "explanation": "e", "lesson": "l"})
    steps: dict[str, Any] = {}

    def memo_value(key: str, compute: Any) -> Any:
        if archive.get_step(key) is None:
            archive.put_step(key, compute())
        return archive.get_step(key)

    def memo_outcome(key: str, model: Any, compute: Any) -> Outcome[Any]:
        stored = memo_value(key, lambda: compute().to_dict())
        return Outcome(model.model_validate(stored["value"]), stored["by"], stored.get("error"))

    ctx = fake_ctx(archive, config=RunConfig(problem="softmax", target="cpu", paired_findings=False),
                   progress=SimpleNamespace(event=lambda *a, **k: steps.setdefault(k.get("experiment"), k)),
                   critic=Critic(llm), view=VIEW, knowledge=None, memo_outcome=memo_outcome, memo_value=memo_value,
                   run_id="run1")
    plan = ExperimentPlan(title="tune", description="d").model_dump()
    specs: Any = [{"id": f"g1e{i}", "generation": 1, "idx": i, "kind": "tune", "plan": plan, "assignment": {},
              "base_id": base.id} for i in range(2)]
    for spec in specs:
        exp.measure_experiment(ctx, spec)
    assert [(e.status, e.kernel_id) for e in archive.experiments(1)] == [("measured", made["g1e0"].id),
                                                                          ("measured", made["g1e1"].id)]
    exp.explain_experiment(ctx, specs[0])
    assert [e.status for e in archive.experiments(1)] == ["done", "measured"]
    exp.explain_experiment(ctx, specs[1])
    assert [e.status for e in archive.experiments(1)] == ["done", "done"]
    first, second = (r.text for r in critic_model.requests)
    assert f"- g1e1 (tune) tune: {made['g1e1'].id} 50.0 [49.0–51.0] µs; 2.00x" in first
    assert f"- g1e0 (tune) tune: {made['g1e0'].id} 90.0" in second
    assert "running" not in first + second
    # A resumed run measures nothing again and explains nothing twice.
    assert exp.measure_experiment(ctx, specs[0])["kernel_id"] == made["g1e0"].id
    exp.explain_experiment(ctx, specs[0])
    assert len(critic_model.requests) == 2


# -- 2. the Researcher knows the Tuner's variants; a duplicate of one is recognised ----------------


def test_the_researcher_is_told_what_the_tuner_tries_this_generation(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from graph import nodes

    archive = Archive(tmp_path / "a.sqlite")
    seed = kernel(archive, TUNABLE, 100.0, origin="seed")
    llm, model = scripted("researcher", {"avenues": [], "plans": [ExperimentPlan(title="p", description="d")
                                                                  .model_dump()]})
    monkeypatch.setattr(nodes, "kernel_report", lambda ctx, k: "")
    ctx = fake_ctx(archive, config=RunConfig(problem="softmax", target="cpu", parallel=1, tuner_per_generation=1),
                   llm_enabled=True, knowledge=None, view=VIEW, researcher=Researcher(llm), run_id="run1",
                   memo_outcome=lambda key, m, compute: compute())
    entries = nodes._design(ctx, 1, {"base_id": seed.id})
    assert [e["kind"] for e in entries] == ["llm", "tune"]
    tuned = entries[1]["plan"]["title"].removeprefix("tune ")
    assert tuned == "UNROLL 1→2"
    assert f"The Tuner tries these in this generation (plan none of them): {tuned}" in model.requests[0].text
    # Without a Tuner variant (no tunables) the line is left out.
    llm, model = scripted("researcher", {"avenues": [], "plans": [ExperimentPlan(title="p", description="d")
                                                                  .model_dump()]})
    Researcher(llm).design(VIEW, KernelView(id="k0", status="ok", source="x"), None, "", [], picks=1)
    assert "The Tuner tries" not in model.requests[0].text


def test_a_candidate_equal_to_a_tuner_variant_still_running_is_a_duplicate(tmp_path: Path) -> None:
    from graph.experiment import duplicate_feedback, evaluated_twin, resolve_twin, sibling_twin
    from graph.tuner import render_variant

    archive = Archive(tmp_path / "a.sqlite")
    base = kernel(archive, TUNABLE, 100.0, origin="seed")
    spec: Any = {"id": "g1e0", "generation": 1, "base_id": base.id,
                 "tuned_siblings": [{"id": "g1e1", "assignment": {"UNROLL": "4"}, "title": "tune UNROLL 1→4"}]}
    # The Coder set the tunable by hand (and reworded a comment): the Tuner's variant, not yet in the archive.
    candidate = render_variant(TUNABLE, {"UNROLL": "4"}).replace("// @tunable UNROLL: 1, 2, 4, 8", "// unrolled")
    assert evaluated_twin(fake_ctx(archive), candidate, "g1e0") is None
    twin = sibling_twin(spec, base, candidate)
    assert twin is not None and twin.id == "g1e1" and twin.status == "pending"
    feedback = duplicate_feedback(twin)
    assert "the Tuner's experiment g1e1 of this generation (tune UNROLL 1→4)" in feedback
    assert sibling_twin(spec, base, render_variant(TUNABLE, {"UNROLL": "8"})) is None
    # Once the variant is measured, the finding names the kernel it made.
    experiment(archive, "g1e1", "tune", "tune UNROLL 1→4", base.id)
    made = kernel(archive, render_variant(TUNABLE, {"UNROLL": "4"}), 90.0, experiment_id="g1e1", origin="tune")
    archive.update_experiment("g1e1", status="measured", kernel_id=made.id)
    resolved = resolve_twin(fake_ctx(archive), "g1e1")
    assert resolved is not None and resolved.id == made.id


def test_every_experiment_is_sent_with_the_tuner_variants_beside_it() -> None:
    from graph.nodes import fan_out

    plans: Any = [{"id": "g1e0", "kind": "llm", "plan": {"title": "p"}},
                  {"id": "g1e1", "kind": "tune", "plan": {"title": "tune UNROLL 1→4"}, "assignment": {"UNROLL": "4"}}]
    sends = fan_out({"plans": plans})
    assert isinstance(sends, list)
    assert sends[0].arg["tuned_siblings"] == [
        {"id": "g1e1", "assignment": {"UNROLL": "4"}, "title": "tune UNROLL 1→4"}]
    assert sends[1].arg["tuned_siblings"] == []


# -- 3. the Selector reads side-by-side ratios and findings ----------------------------------------


def test_the_selector_reads_verified_ratios_and_the_leaders_findings(tmp_path: Path) -> None:
    from graph import verify
    from graph.nodes import selector_findings, verified_ratios

    archive = Archive(tmp_path / "a.sqlite")
    seed = kernel(archive, "seed", 100.0, origin="seed")
    k1 = kernel(archive, "k1", 80.0, experiment_id="g1e0")
    k2 = kernel(archive, "k2", 79.0, experiment_id="g1e1")
    experiment(archive, "g1e0", "llm", "library exp", seed.id)
    experiment(archive, "g1e1", "llm", "inline exp", seed.id)
    archive.put_step("g1e0/side-by-side", {"kernel_id": k1.id, "base_id": seed.id, "ratio": 1.25,
                                           "ratio_ci": [1.2, 1.3], "difference": "faster"})
    verify.record(archive, verify.Verification(kernel_id=k2.id, base_id=k1.id, kernel_sha256="a", base_sha256="b",
                                               status="ok", ratio=1.01, ratio_ci=(0.98, 1.04),
                                               difference="no measurable difference"))
    for eid, kid, lesson in (("g1e0", k1.id, "The library exp vectorises. Keep it."),
                             ("g1e1", k2.id, "Inline exp is no faster. " + "Detail. " * 60),
                             ("g1e2", None, "It did not build.")):
        archive.add_finding(eid, kid, {"experiment_id": eid, "kernel_id": kid, "parent_id": seed.id, "title": eid,
                                       "measured_speedup": 1.25 if kid else None, "status": "ok" if kid else
                                       "build_error", "explanation": "x" * 1200, "lesson": lesson})
    ctx = fake_ctx(archive)
    population = [ctx.kernel_view(k) for k in archive.kernels()]
    verified = verified_ratios(ctx)
    assert f"- {k2.id} against {k1.id}: 1.01x [0.98–1.04], no measurable difference" in verified
    assert f"- {k1.id} against {seed.id}: 1.25x [1.20–1.30], faster" in verified
    findings = selector_findings(ctx, population, limit=2)
    lines = findings.splitlines()
    # The fastest kernels' findings first (k2, then k1), one short line each: no explanation, lesson cut.
    assert [line.split("]")[0] for line in lines] == ["[g1e1", "[g1e0"]
    assert "xxx" not in findings and all(len(line) < 320 for line in lines)
    assert lines[1] == f"[g1e0] {k1.id} of {seed.id}, g1e0: 1.25x (ok). Lesson: The library exp vectorises. Keep it."

    llm, model = scripted("selector", {"base_id": k2.id, "reference_id": k1.id, "reason": "r"})
    Selector(llm).select(VIEW, population, [], verified=verified, findings=findings)
    text = model.requests[0].text
    assert "Timed side by side (base time / kernel time, 95% interval):\n" + verified in text
    assert findings in text
    # Nothing measured side by side, no findings: no empty block.
    llm, model = scripted("selector", {"base_id": k2.id, "reference_id": k1.id, "reason": "r"})
    Selector(llm).select(VIEW, population, [])
    assert "Timed side by side" not in model.requests[0].text and "Findings" not in model.requests[0].text


def test_a_finding_line_names_what_a_duplicate_duplicated() -> None:
    line = finding_line({"experiment_id": "g2e1", "kernel_id": None, "duplicate_of": "k4", "parent_id": "k3",
                         "title": "unroll by 4", "status": "duplicate", "lesson": ""})
    assert line == "[g2e1] same code as k4 of k3, unroll by 4: no speed-up measured (duplicate)"


# -- 4. short finding ids, unique in the store; the lesson apart and concise -----------------------


def finding(**more: Any) -> Finding:
    fields: dict[str, Any] = dict(id="g1e0", run_id="softmax-20261125-101010", hypothesis="h", change="c",
                                  kernel_id="k1", problem="softmax", target="cpu",
                                  explanation="The exp dominates. " * 60, lesson="Store each exp once.")
    return Finding(**(fields | more))


def test_findings_are_cited_by_short_ids_unique_across_runs() -> None:
    mine, other = finding(), finding(run_id="softmax-20261126-090000")
    assert mine.store_key == "softmax-20261125-101010:g1e0" != other.store_key
    assert mine.label("softmax-20261125-101010") == "g1e0"
    assert other.label("softmax-20261125-101010").startswith("g1e0@") and other.label() != mine.label()
    assert finding(run_id=None).label("any") == "g1e0" and finding(run_id=None).store_key == "g1e0"
    prompt = ResearchContext(query="q", literature=[], findings=[FindingHit(finding=mine, score=1.0),
                                                               FindingHit(finding=other, score=0.5)]
                             ).to_prompt(run_id="softmax-20261125-101010")
    assert "[F g1e0] Hypothesis: h" in prompt and f"[F {other.label('softmax-20261125-101010')}]" in prompt
    assert "softmax-20261125" not in prompt
    # The lesson on a line of its own; the explanation cut at a sentence in the prompt, whole where embedded.
    assert "\nLesson: Store each exp once.\n" in prompt
    explanation = next(line for line in prompt.splitlines() if line.startswith("Explanation:"))
    assert explanation.endswith("The exp dominates. [...]") and len(explanation) < 450
    assert mine.explanation.strip() in mine.render()


def test_the_run_stores_its_finding_under_the_experiment_id_with_the_run_apart(tmp_path: Path) -> None:
    from graph.experiment import _remember

    stored: list[Finding] = []
    kb = SimpleNamespace(add_finding=stored.append)
    ctx = SimpleNamespace(run_id="softmax-20261125-101010", view=VIEW, config=RunConfig(problem="softmax",
                                                                                      target="cpu"))
    data = {"experiment_id": "g1e0", "hypothesis": "h", "change": "c", "expected_speedup_min": 1.0,
            "expected_speedup_max": 1.2, "measured_speedup": 1.1, "explanation": "why", "lesson": "what next",
            "kernel_id": "k1", "parent_id": "k0", "status": "ok"}
    _remember(ctx, kb, data)  # type: ignore[arg-type]
    (f,) = stored
    assert (f.id, f.run_id, f.explanation, f.lesson) == ("g1e0", "softmax-20261125-101010", "why", "what next")


@pytest.mark.slow
def test_the_store_keeps_two_runs_findings_of_one_experiment_id(tmp_path: Path) -> None:
    from knowledge.findings import FindingsMemory

    memory = FindingsMemory(tmp_path)
    first = memory.add(finding())
    second = memory.add(finding(run_id="softmax-20261126-090000"))
    assert first != second and memory.count() == 2
    got = memory.get(first)
    assert got is not None and got.id == "g1e0" and got.lesson == "Store each exp once."
    assert {f.run_id for f in memory.history("softmax", "cpu")} == {"softmax-20261125-101010",
                                                                    "softmax-20261126-090000"}
