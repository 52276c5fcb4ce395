"""The roles' pure parts: prompts, plan picking, the fallbacks, edits, and their LLM paths."""

from __future__ import annotations

import pytest

from agents.coder import Coder, EditError, apply_edits, strip_fences
from agents.critic import Critic, fallback_review
from agents.llm import LLMConfig, RoleLLM
from agents.prompts import PromptError, load_prompt, parse_prompt
from agents.researcher import choose_plans
from agents.schemas import Edit, ExperimentPlan
from agents.scripted import ScriptedChatModel
from agents.selector import Selector, fallback_selection
from agents.views import KernelView, ProblemView, population_table

ROLES = ("selector", "researcher", "coder", "critic_review", "critic_explain")


@pytest.mark.parametrize("role", ROLES)
def test_every_prompt_template_loads_with_a_version(role: str) -> None:
    prompt = load_prompt(role)
    assert prompt.role == role and prompt.version >= 1 and prompt.system
    with pytest.raises(PromptError, match="needs a value"):
        prompt.render()


def test_prompt_placeholders_leave_kernel_braces_alone() -> None:
    prompt = parse_prompt("---\nrole: x\nversion: 2\n---\n# system\nS\n# user\ncode: $code\n")
    system, user = prompt.render(code="__global__ void k() { int a[2] = {1, 2}; }")
    assert system == "S" and user == "code: __global__ void k() { int a[2] = {1, 2}; }"
    with pytest.raises(PromptError, match="front matter"):
        parse_prompt("# system\nS\n# user\nU\n")


def plan(title: str, innovation: float, lo: float, hi: float) -> ExperimentPlan:
    return ExperimentPlan(title=title, description=title, est_min_speedup=lo, est_max_speedup=hi, innovation=innovation)


def test_choose_plans_takes_highest_min_most_innovative_highest_expected() -> None:
    plans = [plan("a", 2, 1.0, 1.2), plan("bold", 9, 0.8, 1.5), plan("big", 5, 1.0, 3.0), plan("safe", 1, 1.4, 1.6)]
    assert [p.title for p in choose_plans(plans, 3)] == ["safe", "bold", "big"]
    # -k 2: the highest-minimum plan runs (it came third and never did).
    assert [p.title for p in choose_plans(plans, 2)] == ["safe", "bold"]
    # When one plan wins two criteria, the next distinct plan fills the slot.
    plans = [plan("all", 9, 2.0, 3.0), plan("b", 1, 1.0, 1.1), plan("c", 2, 1.0, 1.2)]
    assert [p.title for p in choose_plans(plans, 3)] == ["all", "c", "b"]
    assert choose_plans(plans, 1)[0].title == "all"


def test_an_inflated_optimistic_estimate_alone_does_not_win_the_gain_slot() -> None:
    # 1.0-4.0 (middle 2.0) claims most at the top; 1.9-2.2 (middle 2.04) expects more.
    plans = [plan("safe", 0, 1.95, 2.0), plan("new", 9, 1.0, 1.1), plan("inflated", 1, 1.0, 4.0),
             plan("solid", 1, 1.9, 2.2)]
    assert [p.title for p in choose_plans(plans, 3)] == ["safe", "new", "solid"]


def kernel(kid: str, geo: float | None, shapes: dict[str, float], status: str = "ok") -> KernelView:
    return KernelView(id=kid, status=status, geomean_us=geo, benchmarks=shapes, source=f"# {kid}\n")


def test_a_research_plan_with_avenues_as_plain_sentences_is_kept() -> None:
    # Seen in a relay run: a reply whose avenues were sentences was refused whole, plans and all.
    from agents.schemas import ResearchPlan

    reply = ResearchPlan.model_validate({"avenues": ["vectorise exp", {"title": "fuse passes", "rationale": "r"}],
                                         "plans": [{"title": "t", "description": "d", "rubric": "one change"}]})
    assert [a.title for a in reply.avenues] == ["vectorise exp", "fuse passes"]
    assert reply.plans[0].rubric == ["one change"]


def test_fallback_selection_prefers_best_and_a_kernel_that_wins_a_shape() -> None:
    population = [
        kernel("k0", 10.0, {"s1": 10, "s2": 10}),
        kernel("k1", 8.0, {"s1": 4, "s2": 16}),
        kernel("k2", 9.0, {"s1": 9, "s2": 9}),
        kernel("k3", None, {}, status="wrong_output"),
    ]
    choice = fallback_selection(population)
    assert choice.base_id == "k1" and choice.reference_id == "k2"  # k2 beats k1 on s2 by 16/9
    with pytest.raises(ValueError, match="no correct kernel"):
        fallback_selection([kernel("k3", None, {}, status="build_error")])


def test_selector_rejects_an_llm_pick_that_is_not_a_correct_kernel() -> None:
    population = [kernel("k0", 10.0, {"s": 10}), kernel("k1", None, {}, status="build_error"), kernel("k2", 12.0, {"s": 12})]
    model = ScriptedChatModel(script=[{"args": {"base_id": "k1", "reason": "why not"}}])
    outcome = Selector(RoleLLM("selector", model, LLMConfig(model="m"))).select(
        ProblemView(name="p", target="cpu"), population, []
    )
    assert outcome.by == "fallback" and outcome.value.base_id == "k0" and "k1" in (outcome.error or "")


def test_population_table_lists_best_first_then_failures() -> None:
    table = population_table(
        [kernel("k0", 10.0, {"s": 10}), kernel("k1", 5.0, {"s": 5}), kernel("k2", None, {}, "crash")]
    )
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:] if line.startswith("|")]
    assert rows == ["k1", "k0", "k2"]


def test_edits_apply_once_and_explain_a_miss() -> None:
    source = "a = 1\nb = 2\n"
    assert apply_edits(source, [Edit(search="b = 2", replace="b = 3")]) == "a = 1\nb = 3\n"
    with pytest.raises(EditError, match="does not occur"):
        apply_edits(source, [Edit(search="c = 1", replace="")])
    with pytest.raises(EditError, match="occurs 2 times"):
        apply_edits("x\nx\n", [Edit(search="x", replace="y")])
    assert strip_fences("```python\nprint(1)\n```") == "print(1)\n"


def test_coder_applies_edits_to_the_base_file() -> None:
    model = ScriptedChatModel(
        script=[
            {
                "args": {
                    "mode": "edits",
                    "edits": [{"search": "BLOCK = 64", "replace": "BLOCK = 128"}],
                    "summary": "bigger blocks",
                }
            }
        ]
    )
    coder = Coder(RoleLLM("coder", model, LLMConfig(model="m")))
    base = KernelView(id="k0", status="ok", source="BLOCK = 64\n")
    candidate = coder.write(ProblemView(name="p", target="cpu"), plan("x", 1, 1, 1), base, None)
    assert candidate.source == "BLOCK = 128\n" and candidate.summary == "bigger blocks"


def test_critic_cannot_approve_past_an_integrity_error() -> None:
    findings = [{"rule": "reference-call", "severity": "error", "line": 3, "reason": "calls ref_kernel"}]
    assert not fallback_review(findings).approve
    model = ScriptedChatModel(script=[{"args": {"approve": True, "issues": []}}])
    outcome = Critic(RoleLLM("critic", model, LLMConfig(model="m"))).review(plan("x", 1, 1, 1), "src", findings, "")
    assert not outcome.value.approve and "calls ref_kernel" in outcome.value.issues[0]
