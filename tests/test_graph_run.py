"""Full runs of the scientist on the CPU target: real kernels, the real sandbox, scripted roles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.llm import LLMConfig
from graph.archive import Archive
from graph.config import Budgets, LLMSettings, RunConfig, SandboxSettings
from graph.export import export_kernel
from graph.runs import build_context, create_run, execute
from tests.scientist_script import FAST_SOFTMAX, SLOW_SOFTMAX, coder_writing, scientist_models

SCRIPTED = LLMSettings(default=LLMConfig(model="scripted", max_retries=0))


def scripted_run(tmp_path: Path, models: dict[str, Any], **overrides: Any) -> tuple[dict[str, Any], Archive, Any]:
    config = RunConfig(
        problem="softmax",
        target="cpu",
        seed=str(SLOW_SOFTMAX),
        parallel=1,
        tuner_per_generation=0,
        budgets=Budgets(generations=overrides.pop("generations", 1), patience=None),
        sandbox=SandboxSettings(timing_budget_s=0.2),
        llm=SCRIPTED,
        use_knowledge=False,
        **overrides,
    )
    handle = create_run(config, tmp_path / "runs")
    archive = Archive(handle.archive_path)
    ctx = build_context(handle, archive, chat_models=models)
    final = execute(handle, ctx)
    return final, archive, handle


def test_scripted_run_improves_the_seed(tmp_path: Path) -> None:
    models = scientist_models()
    final, archive, handle = scripted_run(tmp_path, models)
    assert final["stop_reason"] == "generation budget reached (1)"
    seed, best = archive.seed(), archive.best()
    assert seed is not None and seed.ok
    assert best is not None and best.id != seed.id and best.origin == "llm"
    assert best.parents == [seed.id]
    assert seed.geomean_us / best.geomean_us > 1.2  # one thread, two exps -> all cores, one exp
    # Every role was asked, and every call is in the archive with its prompt and tokens.
    roles = {c["role"] for c in archive.llm_calls()}
    assert roles == {"selector", "researcher", "coder", "critic"}
    assert all(c["ok"] and c["input_tokens"] > 0 for c in archive.llm_calls())
    coder_prompt = models["coder"].requests[0].text
    assert "parallel rows, one exponential per element" in coder_prompt and "softmax_rows" in coder_prompt
    # The Critic's finding is stored with the numbers the sandbox measured.
    (finding,) = archive.findings()
    assert finding["kernel_id"] == best.id and finding["measured_speedup"] > 1.2 and finding["by"] == "llm"
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
    assert {c["role"] for c in calls} == {"selector", "researcher"}  # no plan, so no Coder call
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
