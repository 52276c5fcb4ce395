"""Every bundled problem on the CPU target: its seed passes, broken candidates fail clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate
from sandbox.judge.bound import BATCH_STEPS
from sandbox.problem import bundled_problems, load_problem
from sandbox.verdict import Status
from tests.candidates import BODIES, write_broken, write_build_error

CPU_PROBLEMS = [name for name, path in bundled_problems().items() if "cpu" in load_problem(path, "cpu").targets]
CHECK = EvalOptions(target="cpu", mode="check", limits=PhaseLimits(build=300, check=120, time=120))


def test_bundled_problems_cover_the_issue() -> None:
    expected = {"vector_add", "softmax", "rmsnorm", "matmul_bf16", "fp8_blockscale_gemm", "mla_decode", "moe"}
    assert expected <= set(bundled_problems())
    for name in expected:
        spec = load_problem(name, "cpu")
        assert {"cpu", "cuda"} <= set(spec.targets), name
        assert spec.tolerance is not None, name
        assert spec.roofline.flops is not None and spec.roofline.bytes is not None, name
        for params in spec.benchmarks:
            flops, nbytes = spec.roofline.at(params)
            assert flops and flops > 0 and nbytes and nbytes > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_PROBLEMS)
def test_seed_passes_and_is_timed(name: str) -> None:
    spec = load_problem(name, "cpu")
    options = EvalOptions(target="cpu", timing={"budget_s": 0.2, "warmup_s": 0.0, "min_reps": 3})
    verdict = evaluate(name, spec.seed_for("cpu"), options)
    assert verdict.status == Status.ok, verdict.message + "\n" + "\n".join(verdict.errors)
    # Every test shape and every benchmark shape, plain and under each of the problem's adversarial
    # value cases (the benchmark shapes before they are timed).
    checked = (len(spec.tests) + len(spec.benchmarks)) * (1 + len(spec.adversarial))
    assert len(verdict.tests) == checked and all(t.passed for t in verdict.tests)
    assert len(verdict.benchmarks) == len(spec.benchmarks)
    for bench in verdict.benchmarks:
        assert bench.median_us > 0 and bench.reps >= 3
        assert bench.min_us <= bench.median_us <= bench.max_us
        assert bench.reference_median_us and bench.speedup
        assert bench.sol_us and bench.pct_sol
        # What the runner says of each timed batch, shown beside the judge's clock (never believed): every step.
        said = ((bench.judge or {}).get("runner_steps_us") or {}).get("kernel_batches") or []
        assert said and all(b and len(b) == len(BATCH_STEPS) for b in said), said
    assert verdict.summary and verdict.summary.geomean_us and verdict.summary.speedup
    assert verdict.environment["torch"] and verdict.environment["device"]
    assert set(verdict.phases) == {"build", "check", "time"}


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_PROBLEMS)
@pytest.mark.parametrize("kind", ["wrong_values", "unwritten_output", "wrong_shape"])
def test_wrong_output_is_rejected_with_a_reason(name: str, kind: str, tmp_path: Path) -> None:
    seed = load_problem(name, "cpu").seed_for("cpu")
    verdict = evaluate(name, write_broken(tmp_path, seed, kind), CHECK)
    assert verdict.status == Status.wrong_output, (kind, verdict.status, verdict.message)
    failed = [t for t in verdict.tests if not t.passed]
    assert failed
    message = failed[0].message
    if kind == "wrong_shape":
        assert "shape" in message
    else:
        # The message names the worst element and its error.
        assert "worst" in message and "expected" in message, message
        assert failed[0].worst_index is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_PROBLEMS)
def test_exception_is_a_runtime_error(name: str, tmp_path: Path) -> None:
    seed = load_problem(name, "cpu").seed_for("cpu")
    verdict = evaluate(name, write_broken(tmp_path, seed, "raises"), CHECK)
    assert verdict.status == Status.runtime_error
    assert "candidate gave up" in verdict.message


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_PROBLEMS)
def test_segfault_is_a_crash(name: str, tmp_path: Path) -> None:
    seed = load_problem(name, "cpu").seed_for("cpu")
    verdict = evaluate(name, write_broken(tmp_path, seed, "segfault"), CHECK)
    assert verdict.status == Status.crash
    assert "SIGSEGV" in verdict.message and "during the check phase (shape " in verdict.message, verdict.message


@pytest.mark.slow
@pytest.mark.parametrize("name", CPU_PROBLEMS)
def test_hang_is_killed_at_the_phase_limit(name: str, tmp_path: Path) -> None:
    seed = load_problem(name, "cpu").seed_for("cpu")
    options = EvalOptions(target="cpu", mode="check", limits=PhaseLimits(build=300, check=3, time=60))
    verdict = evaluate(name, write_broken(tmp_path, seed, "hangs"), options)
    assert verdict.status == Status.timeout
    # The message names the phase, the shape it ended on and the limit, in a user's words.
    assert re.search(r"the check phase \(shape [^)]+\) exceeded its 3 s limit; the candidate was stopped", verdict.message), \
        verdict.message
    assert verdict.problem is not None and verdict.problem.name == name
    assert verdict.wall_seconds < 60


@pytest.mark.slow
def test_build_error_carries_diagnostics(tmp_path: Path) -> None:
    verdict = evaluate("vector_add", write_build_error(tmp_path), CHECK)
    assert verdict.status == Status.build_error
    assert "undefined_name" in verdict.message
    assert verdict.diagnostics and verdict.diagnostics[0].line == 2
    assert verdict.diagnostics[0].severity == "error"
    assert verdict.build.records and not verdict.build.records[0].ok
    assert "undefined_name" in verdict.build.records[0].log


@pytest.mark.slow
def test_a_good_candidate_after_a_crash_gets_a_correct_verdict(tmp_path: Path) -> None:
    seed = load_problem("vector_add", "cpu").seed_for("cpu")
    assert evaluate("vector_add", write_broken(tmp_path, seed, "segfault"), CHECK).status == Status.crash
    assert evaluate("vector_add", seed, CHECK).status == Status.ok


def test_all_broken_kinds_are_exercised() -> None:
    assert set(BODIES) == {"wrong_values", "unwritten_output", "wrong_shape", "raises", "segfault", "hangs"}


@pytest.mark.slow
def test_a_missing_package_or_entry_point_is_one_line_that_says_what_is_needed(tmp_path: Path) -> None:
    needs = tmp_path / "needs.py"
    needs.write_text("import helion_not_installed_here.language as hl\n\ndef custom_kernel(data):\n    return data[2]\n")
    verdict = evaluate("vector_add", needs, CHECK)
    assert verdict.status == Status.runtime_error
    assert "needs the Python package 'helion_not_installed_here'" in verdict.message
    nameless = tmp_path / "nameless.py"
    nameless.write_text("custom_kernel = 3\n")
    verdict = evaluate("vector_add", nameless, CHECK)
    assert verdict.status == Status.runtime_error and "defines no custom_kernel(data)" in verdict.message
    assert not any("Traceback" in e for e in verdict.errors)  # a user's mistake, not the harness's
