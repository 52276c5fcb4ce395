"""The scientist on an NVIDIA GPU: a Tuner-only run and a scripted-LLM run on the cuda target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.llm import LLMConfig
from graph.archive import Archive
from graph.config import Budgets, LLMSettings, RunConfig, SandboxSettings
from graph.export import export_kernel
from graph.runs import build_context, create_run, execute
from sandbox.problem import load_problem
from tests import scientist_script as script

pytestmark = pytest.mark.gpu


def run(tmp_path: Path, models: dict[str, Any] | None, **fields: Any) -> tuple[dict[str, Any], Archive]:
    config = RunConfig(
        **{
            "problem": "softmax",
            "target": "cuda",
            "parallel": 2,
            "budgets": Budgets(generations=2, patience=None),
            "sandbox": SandboxSettings(timing_budget_s=0.3),
            "use_knowledge": False,
        }
        | fields
    )
    handle = create_run(config, tmp_path / "runs")
    archive = Archive(handle.archive_path)
    final = execute(handle, build_context(handle, archive, chat_models=models))
    return final, archive


def test_tuner_only_run_on_cuda(tmp_path: Path) -> None:
    final, archive = run(tmp_path, None)
    assert final["stop_reason"] in (
        "generation budget reached (2)",
        "the Tuner has no untried values left (no LLM configured)",
    )
    kernels = archive.kernels()
    assert kernels[0].origin == "seed" and kernels[0].ok
    assert sum(k.origin == "tune" for k in kernels) >= 3
    assert all(k.ok for k in kernels), [(k.id, k.status, k.message[:200]) for k in kernels if not k.ok]
    best = archive.best()
    assert best.geomean_us <= kernels[0].geomean_us
    out = tmp_path / "submission.py"
    export_kernel(archive, out, "cuda")
    assert out.read_text().startswith("#!POPCORN leaderboard softmax\n#!POPCORN gpus H100\n")


def test_scripted_llm_run_on_cuda_reviews_the_resource_report(tmp_path: Path) -> None:
    seed = load_problem("softmax", "cuda").seed_for("cuda").read_text()
    variant = seed.replace("constexpr int THREADS = 256;", "constexpr int THREADS = 512;")
    assert variant != seed
    models = script.scientist_models(coder=script.coder_writing(variant))
    final, archive = run(
        tmp_path,
        models,
        parallel=1,
        tuner_per_generation=0,
        budgets=Budgets(generations=1, patience=None),
        llm=LLMSettings(default=LLMConfig(model="scripted", max_retries=0)),
    )
    assert final["stop_reason"] == "generation budget reached (1)"
    (candidate,) = [k for k in archive.kernels() if k.origin == "llm"]
    assert candidate.ok, candidate.message
    review = next(r.text for r in models["critic"].requests if "Static integrity scan" in r.text)
    assert "static report (nvidia" in review  # the sm_90a resource report reached the Critic
    explain = next(r.text for r in models["critic"].requests if "Outcome:" in r.text)
    assert "µs" in explain
