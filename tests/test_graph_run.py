"""Full runs of the scientist on the CPU target: real kernels, the real sandbox, scripted roles."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agents.llm import LLMConfig
from graph.archive import Archive
from graph.config import Budgets, LLMSettings, RunConfig, SandboxSettings
from graph.export import export_kernel
from graph.runs import build_context, create_run, execute
from tests.scientist_script import FAST_SOFTMAX, SLOW_SOFTMAX, coder_writing, scientist_models

pytestmark = pytest.mark.slow  # every test here starts runs, workers or a server

SCRIPTED = LLMSettings(default=LLMConfig(model="scripted", max_retries=0))


def scripted_run(tmp_path: Path, models: dict[str, Any], **overrides: Any) -> tuple[dict[str, Any], Archive, Any]:
    fields: dict[str, Any] = {
        "problem": "softmax",
        "target": "cpu",
        "seed": str(SLOW_SOFTMAX),
        "parallel": 1,
        "tuner_per_generation": 0,
        "budgets": Budgets(generations=overrides.pop("generations", 1), patience=None),
        "sandbox": SandboxSettings(timing_budget_s=0.2, verify_wins=False),  # on where a test looks at it
        "llm": SCRIPTED,
        "use_knowledge": False,
    }
    config = RunConfig(**(fields | overrides))
    handle = create_run(config, tmp_path / "runs")
    archive = Archive(handle.archive_path)
    ctx = build_context(handle, archive, chat_models=models)
    final = execute(handle, ctx)
    return final, archive, handle


def test_scripted_run_improves_the_seed(tmp_path: Path) -> None:
    from graph import verify

    models = scientist_models()
    final, archive, handle = scripted_run(tmp_path, models, sandbox=SandboxSettings(timing_budget_s=0.2))
    assert final["stop_reason"] == "generation budget reached (1)"
    seed, best = archive.seed(), archive.best()
    assert seed is not None and seed.ok
    assert best is not None and best.id != seed.id and best.origin == "llm"
    # The new leader was timed beside the seed in two fresh judges before it became the run's best.
    (check, *_) = [v for v in verify.verifications(archive) if v.kernel_id == best.id and v.base_id == seed.id]
    assert check.confirmed and len(check.trials) == verify.TRIALS, check.describe()
    assert final["best_id"] == best.id
    assert best.parents == [seed.id]
    assert seed.geomean_us / best.geomean_us > 1.2  # one thread, two exps -> all cores, one exp
    # Every role was asked but the Selector (the seed alone: the choice is forced), and every call is
    # in the archive with its prompt and tokens.
    roles = {c["role"] for c in archive.llm_calls()}
    assert roles == {"researcher", "coder", "critic"}
    assert all(c["ok"] and c["input_tokens"] > 0 for c in archive.llm_calls())
    coder_prompt = models["coder"].requests[0].text
    assert "parallel rows, one exponential per element" in coder_prompt and "softmax_rows" in coder_prompt
    # The Researcher read what the compiler made of the base (CPU: which loops it vectorised).
    assert "What the compiler made of the base:\nvectorisation report" in models["researcher"].requests[0].text
    # The Critic's finding is stored with the numbers the sandbox measured.
    (finding,) = archive.findings()
    assert finding["kernel_id"] == best.id and finding["measured_speedup"] > 1.2 and finding["by"] == "llm"
    # Its separate timing claimed a gain, so it was timed beside its base before the Critic explained
    # it, and the finding's figure is that side-by-side one.
    paired = archive.get_step(f"{finding['experiment_id']}/side-by-side")
    assert paired is not None and paired["difference"] == "faster", paired
    assert finding["measured_speedup"] == pytest.approx(paired["ratio"])
    explain_prompt = models["critic"].requests[-1].text
    assert "timed side by side with the base" in explain_prompt
    assert "| side by side (base / candidate) |" in explain_prompt  # and each shape's own ratio
    out = tmp_path / "best.py"
    export_kernel(archive, out, "cpu", leaderboard="softmax")
    assert out.read_text().startswith("#!POPCORN leaderboard softmax\n")
    assert "softmax_fast" in out.read_text()


BROKEN = FAST_SOFTMAX.read_text().replace("float total = 0.0f;", "float total = 0.0f")  # a missing ';'


def test_build_failure_is_repaired_with_the_compiler_diagnostics(tmp_path: Path) -> None:
    models = scientist_models(coder=coder_writing(BROKEN, FAST_SOFTMAX.read_text()))
    final, archive, _ = scripted_run(tmp_path, models)
    attempts = archive.experiment_kernels("g1e0")
    assert [k.status for k in attempts] == ["build_error", "ok"]
    assert [k.attempt for k in attempts] == [0, 1]
    repair_prompt = models["coder"].requests[1].text
    assert "failed in the sandbox" in repair_prompt and "build_error" in repair_prompt
    assert "error: expected" in repair_prompt and "before ‘for’" in repair_prompt  # the compiler's words
    assert "float total = 0.0f\n" in repair_prompt  # and it edits its failed file, not the base
    assert archive.best().id == attempts[1].id


def test_garbage_from_every_role_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    models = scientist_models(garbage=True)
    final, archive, _ = scripted_run(tmp_path, models, generations=2)
    assert final["stop_reason"] == "generation budget reached (2)"
    calls = archive.llm_calls()
    assert calls and not any(c["ok"] for c in calls)
    assert {c["role"] for c in calls} == {"researcher"}  # no plan, no Coder; the seed alone: no Selector call
    # The Selector fell back to the deterministic choice; the population is just the seed.
    assert [k.origin for k in archive.kernels()] == ["seed"]
    gens = archive.generations()
    assert [g["generation"] for g in gens] == [1, 2] and all(g["experiments"] == 0 for g in gens)


def test_unusable_coder_reply_fails_the_experiment_not_the_run(tmp_path: Path) -> None:
    models = scientist_models(coder=lambda messages, kwargs: "here is my kernel, trust me")
    final, archive, _ = scripted_run(tmp_path, models, coder_attempts=2)
    (experiment,) = archive.experiments()
    assert experiment.status == "done" and experiment.kernel_id is None
    assert experiment.finding and experiment.finding["status"] == "no_candidate"
    # Two attempts, each going down the whole fallback chain before giving up.
    methods = [c["method"] for c in archive.llm_calls() if c["role"] == "coder"]
    assert methods == ["json_schema", "function_calling", "json_mode", "text"] * 2
    assert final["stop_reason"] == "generation budget reached (1)"


@pytest.mark.parametrize("approve_first", [False])
def test_critic_sends_a_candidate_back_once(tmp_path: Path, approve_first: bool) -> None:
    from tests import scientist_script as script

    reviews = {"n": 0}

    def critic(messages: Any, kwargs: Any) -> Any:
        text = script.prompt_text(messages)
        if "Static integrity scan" in text:
            reviews["n"] += 1
            if reviews["n"] == 1:
                return {"args": {"approve": False, "issues": ["rows are not split over threads"], "advice": "omp"}}
        return script.approve(messages, kwargs)

    models = scientist_models()
    models["critic"] = script.ScriptedChatModel(responder=critic)
    final, archive, _ = scripted_run(tmp_path, models)
    assert reviews["n"] == 2
    second_coder_prompt = models["coder"].requests[1].text
    assert "rows are not split over threads" in second_coder_prompt
    assert archive.best().origin == "llm"


class Killed(BaseException):
    """Stands in for the process dying: nothing in the run may catch it."""


def test_resume_after_an_interruption_repeats_no_finished_step(tmp_path: Path) -> None:
    from tests import scientist_script as script

    def critic_dying_in_generation_2(messages: Any, kwargs: Any) -> Any:
        if "Static integrity scan" not in script.prompt_text(messages) and explained["n"] >= 2:
            raise Killed()
        if "Static integrity scan" not in script.prompt_text(messages):
            explained["n"] += 1
        return script.approve(messages, kwargs)

    explained = {"n": 0}
    two_plans = {"n": 0}

    def researcher(messages: Any, kwargs: Any) -> Any:
        two_plans["n"] += 1
        reply = script.researcher(messages, kwargs)
        other = dict(script.PLAN, title="same kernel, different name", innovation=9, est_max_speedup=1.1)
        reply["args"]["plans"] = [script.PLAN, other]
        return reply

    models = scientist_models()
    models["critic"] = script.ScriptedChatModel(responder=critic_dying_in_generation_2)
    models["researcher"] = script.ScriptedChatModel(responder=researcher)
    with pytest.raises(Killed):
        scripted_run(tmp_path, models, generations=2, parallel=2, directives=["keep register use under 128"])
    handle_dir = next((tmp_path / "runs").iterdir())
    archive = Archive(handle_dir / "archive.sqlite")
    assert archive.get_meta("status") == "interrupted"
    done_before = {e.id: e.kernel_id for e in archive.experiments() if e.status == "done"}
    assert {"g1e0", "g1e1"} <= set(done_before)
    evaluations_before = len(archive.evaluation_log())
    calls_before = len(archive.llm_calls())
    # Generation 1 ran two experiments in parallel, and the directive reached both planning prompts.
    assert "keep register use under 128" in models["selector"].requests[0].text
    assert "keep register use under 128" in models["researcher"].requests[0].text

    fresh = scientist_models()
    from graph.run_handle import open_run

    handle = open_run(handle_dir)
    final = execute(handle, build_context(handle, archive, chat_models=fresh))
    assert final["stop_reason"] == "generation budget reached (2)"
    after = {e.id: e.kernel_id for e in archive.experiments()}
    assert all(after[eid] == kid for eid, kid in done_before.items())  # nothing finished was lost or redone
    log = archive.evaluation_log()
    assert len({row["sha256"] for row in log}) == len(log)  # no source evaluated twice
    assert len(log) >= evaluations_before
    # Finished LLM steps came from the archive: the fresh models got no selector or researcher
    # request for generation 2's finished planning, and generation 1 was not asked again.
    assert not fresh["selector"].requests and not fresh["researcher"].requests
    assert len(archive.llm_calls()) > calls_before
    assert archive.get_meta("status") == "finished"


@pytest.mark.parametrize(
    ("budgets", "reason"),
    [
        ({"max_tokens": 1}, "token budget reached"),
        ({"max_cost_usd": 1e-9}, "cost budget reached"),
        ({"patience": 1}, "no improvement for 1 generations"),
        ({"wall_time_s": 0.001}, "wall-time budget reached"),
    ],
)
def test_budgets_stop_the_run(tmp_path: Path, budgets: dict[str, Any], reason: str) -> None:
    priced = LLMSettings(default=LLMConfig(model="scripted", max_retries=0, price_input_per_mtok=1.0))
    config = RunConfig(
        problem="softmax",
        target="cpu",
        seed=str(SLOW_SOFTMAX),
        parallel=1,
        tuner_per_generation=0,
        budgets=Budgets(generations=5, **({"patience": None} | budgets)),
        sandbox=SandboxSettings(timing_budget_s=0.1, verify_wins=False),
        llm=priced,
        use_knowledge=False,
    )
    handle = create_run(config, tmp_path / "runs")
    archive = Archive(handle.archive_path)
    final = execute(handle, build_context(handle, archive, chat_models=scientist_models(garbage=True)))
    assert final["stop_reason"].startswith(reason)
    assert len(archive.generations()) == 1


def test_a_run_replays_from_its_archive_without_the_llm(tmp_path: Path) -> None:
    from graph.runs import replay_chat_models

    models = scientist_models(coder=coder_writing(BROKEN, FAST_SOFTMAX.read_text()))
    _, recorded, handle = scripted_run(tmp_path / "first", models)
    replayed_models = replay_chat_models(recorded, handle.config)
    _, replayed, _ = scripted_run(tmp_path / "again", replayed_models)
    # The same plans, the same files, the same verdict statuses; every recorded reply was used.
    assert [(k.origin, k.sha256, k.status) for k in replayed.kernels()] == [
        (k.origin, k.sha256, k.status) for k in recorded.kernels()
    ]
    assert [c["method"] for c in replayed.llm_calls()] == [c["method"] for c in recorded.llm_calls()]
    for model in replayed_models.values():
        model.assert_exhausted()


def test_a_generation_is_explained_whole_and_the_tuner_is_in_the_conversation(tmp_path: Path) -> None:
    """Issue 15, from a run played by hand with -k 2: the Researcher is told the Tuner's variant of its
    generation; a Coder that writes that variant anyway is sent back before review; each explanation
    sees its sibling measured (not "running"); the next Selector reads the side-by-side ratio and the
    findings."""
    from graph.archive import KernelRecord
    from graph.experiment import normalised_source
    from graph.tuner import render_variant, tune_plans
    from sandbox.tunables import current_assignment, describe, parse_tunables
    from tests import scientist_script as script

    seed_source = (script.FIXTURES / "softmax_tunable.py").read_text()
    seed = KernelRecord(id="k0", generation=0, origin="seed", summary="", source=seed_source, sha256="", status="ok")
    (tuned,) = tune_plans(seed, [seed], 1)
    variant = render_variant(seed_source, tuned["assignment"])
    change = describe(tuned["assignment"], current_assignment(parse_tunables(seed_source)))
    answers = {"n": 0}

    def coder(messages: Any, kwargs: Any) -> Any:
        answers["n"] += 1
        source = variant if answers["n"] == 1 else script.distinct(FAST_SOFTMAX.read_text(), answers["n"])
        return {"args": {"mode": "file", "source": source, "summary": "omp rows, single exp"}}

    models = scientist_models(coder=coder)
    final, archive, _ = scripted_run(tmp_path, models, seed=str(script.FIXTURES / "softmax_tunable.py"),
                                     tuner_per_generation=1, generations=2)
    assert final["stop_reason"] == "generation budget reached (2)"
    # The Researcher knew the Tuner's variant before planning.
    assert f"The Tuner tries these in this generation (plan none of them): {change}" in \
        models["researcher"].requests[0].text
    # The Coder's copy of it was recognised before review, built and timed once (by the Tuner).
    assert "same code as" in models["coder"].requests[1].text
    llm_kernels = archive.experiment_kernels("g1e0")
    assert llm_kernels and all(normalised_source(k.source) != normalised_source(variant) for k in llm_kernels)
    reviews = [r.text for r in models["critic"].requests if "Static integrity scan" in r.text]
    assert not any("+#define STORE_EXP 1" in r and "ANSWER" not in r for r in reviews)
    # Each explanation of generation 1 saw its sibling's measured outcome.
    explains = [r.text for r in models["critic"].requests if "Static integrity scan" not in r.text
                and "Sibling experiments of this generation" in r.text]
    g1 = {e.id: e for e in archive.experiments(1)}
    assert set(g1) == {"g1e0", "g1e1"} and all(e.status == "done" and e.kernel_id for e in g1.values())
    for eid, other in (("g1e0", "g1e1"), ("g1e1", "g1e0")):
        title = g1[eid].plan["title"]
        # Generation 2 plans under the same title; its explanation names its own siblings.
        (prompt,) = [p for p in explains if f"Plan: {title}\n" in p and f"generation:\n- {other} (" in p]
        siblings = prompt.split("Sibling experiments of this generation:\n", 1)[1]
        assert siblings.startswith(f"- {other} ({g1[other].kind}) ") and f": {g1[other].kernel_id} " in siblings
        assert re.search(r"[\d.]+x \[[\d.]+–[\d.]+\] the base (side by side|timed apart), ", siblings), siblings
        assert "running" not in siblings and "not measured" not in siblings
    # Generation 2's Selector read the pair timed side by side and the findings, one line each.
    selector_prompt = models["selector"].requests[0].text
    assert "Findings of the experiments that made the leaders, and the latest:\n[g1e" in selector_prompt
    paired = archive.get_step("g1e0/side-by-side")
    if paired and paired.get("ratio"):
        assert f"- {g1['g1e0'].kernel_id} against {archive.seed().id}: " in selector_prompt
