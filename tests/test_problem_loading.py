"""Loading problems: GPU MODE directories as they are, KernelBench files, and bad input."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, evaluate
from sandbox.problem import ProblemError, eval_size_expression, load_gpumode, load_problem
from sandbox.verdict import Status

FIXTURES = Path(__file__).parent / "fixtures"
CHECK = EvalOptions(target="cpu", mode="check")


def _foreign_problem(root: Path) -> Path:
    """A GPU MODE problem in the public repository's style: utils.py one level up,
    a check that returns a message string (empty when correct), no extra block."""
    (root / "utils.py").write_text(textwrap.dedent('''
        import torch

        def make_match_reference(reference, rtol, atol):
            def check(data, output):
                expected = reference(data)
                if output.shape != expected.shape:
                    return "SIZE MISMATCH"
                bad = ~torch.isclose(output, expected, rtol=rtol, atol=atol)
                if bad.any():
                    return f"mismatch at {int(bad.sum())} elements"
                return ""
            return check
    '''))
    task = root / "scale"
    task.mkdir()
    (task / "task.yml").write_text(textwrap.dedent('''
        files:
          - {"name": "submission.py", "source": "@SUBMISSION@"}
        lang: "py"
        description: "Multiply a matrix by two."
        tests:
          - {"n": 5, "seed": 1}
          - {"n": 64, "seed": 2}
        benchmarks:
          - {"n": 128, "seed": 3}
        ranking_by: "geom"
    '''))
    (task / "task.py").write_text("import torch\ninput_t = torch.Tensor\noutput_t = torch.Tensor\n")
    (task / "reference.py").write_text(textwrap.dedent('''
        import torch
        from task import input_t, output_t
        from utils import make_match_reference

        def generate_input(n: int, seed: int) -> input_t:
            gen = torch.Generator()
            gen.manual_seed(seed)
            return torch.randn(n, n, generator=gen)

        def ref_kernel(data: input_t) -> output_t:
            return data * 2

        check_implementation = make_match_reference(ref_kernel, rtol=1e-5, atol=1e-6)
    '''))
    (task / "submission.py").write_text(
        "from task import input_t, output_t\n\ndef custom_kernel(data: input_t) -> output_t:\n    return data + data\n"
    )
    return task


def test_gpumode_directory_loads_as_is(tmp_path: Path) -> None:
    task = _foreign_problem(tmp_path)
    spec = load_problem(task)
    assert spec.kind == "gpumode" and spec.name == "scale"
    assert [t["n"] for t in spec.tests] == [5, 64] and spec.benchmarks == [{"n": 128, "seed": 3}]
    assert spec.ranking_by == "geom" and spec.tolerance is None
    assert spec.seeds == {"cuda": task / "submission.py"}


@pytest.mark.slow
def test_gpumode_problem_own_check_decides(tmp_path: Path) -> None:
    task = _foreign_problem(tmp_path)
    good = evaluate(task, task / "submission.py", EvalOptions(target="cpu", timing={"budget_s": 0.1}))
    assert good.status == Status.ok, good.message
    assert good.benchmarks and good.summary.geomean_us > 0
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def custom_kernel(data):\n    return data * 2.001\n")
    verdict = evaluate(task, wrong, CHECK)
    assert verdict.status == Status.wrong_output
    # The problem's own message, plus our worst-element diagnostics.
    assert "mismatch at" in verdict.tests[0].message and "worst element" in verdict.tests[0].message


@pytest.mark.slow
def test_kernelbench_file_loads_and_evaluates() -> None:
    problem = FIXTURES / "kernelbench" / "linear_relu.py"
    spec = load_problem(problem)
    assert spec.kind == "kernelbench" and spec.name == "linear_relu"
    assert "relu" in spec.description
    verdict = evaluate(problem, FIXTURES / "kernelbench" / "linear_relu_new.py", EvalOptions(target="cpu", timing={"budget_s": 0.1}))
    assert verdict.status == Status.ok, verdict.message + "\n".join(verdict.errors)
    assert verdict.summary.speedup is not None
    wrong = evaluate(problem, FIXTURES / "kernelbench" / "linear_relu_wrong.py", CHECK)
    assert wrong.status == Status.wrong_output
    assert "worst element" in wrong.tests[0].message


@pytest.mark.slow
def test_kernelbench_candidate_without_modelnew(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("class Model:\n    pass\n")
    verdict = evaluate(FIXTURES / "kernelbench" / "linear_relu.py", bad, CHECK)
    assert verdict.status == Status.runtime_error and "ModelNew" in verdict.message


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: None, "no task.yml"),
        (lambda d: (d / "task.yml").write_text("tests: [1, 2"), "not valid YAML"),
        (lambda d: (d / "task.yml").write_text("- a list"), "mapping"),
    ],
)
def test_bad_problem_directories_are_named(tmp_path: Path, setup, message: str) -> None:
    setup(tmp_path)
    if (tmp_path / "task.yml").exists():
        (tmp_path / "reference.py").write_text("")
        (tmp_path / "task.py").write_text("")
        (tmp_path / "utils.py").write_text("")
    with pytest.raises(ProblemError, match=message):
        load_gpumode(tmp_path)


@pytest.mark.slow
def test_missing_reference_function_is_reported(tmp_path: Path) -> None:
    task = _foreign_problem(tmp_path)
    (task / "reference.py").write_text("def generate_input(n, seed):\n    return None\n")
    verdict = evaluate(task, task / "submission.py", CHECK)
    assert verdict.status == Status.harness_error
    assert "ref_kernel" in verdict.message


def test_layouts_of_the_current_reference_kernels_repository(tmp_path: Path) -> None:
    """utils.py named in task.yml's `files:` (the linalg problems); a problem whose own eval.py
    replaces task.py; distributed problems; references that make CUDA tensors, on the CPU target."""
    task = _foreign_problem(tmp_path)
    shared = tmp_path / "elsewhere"
    shared.mkdir()
    (tmp_path / "utils.py").rename(shared / "utils.py")
    yml = task / "task.yml"
    yml.write_text(yml.read_text().replace(
        'files:\n', 'files:\n  - {"name": "utils.py", "source": "../elsewhere/utils.py"}\n'
    ))  # fmt: skip
    assert load_problem(task).utils_path == shared / "utils.py"

    (task / "task.py").unlink()
    (task / "eval.py").write_text("")
    with pytest.raises(ProblemError, match="no task.py and its own eval.py defines"):
        load_problem(task)
    (task / "task.py").write_text("")

    reference = (task / "reference.py").read_text()
    (task / "reference.py").write_text(reference.replace("def generate_input(n: int, seed: int)", "def generate_input(rank, world_size, n, seed)"))
    with pytest.raises(ProblemError, match="distributed problem .* needs several GPUs"):
        load_problem(task, "cuda")

    (task / "reference.py").write_text(reference.replace("torch.Generator()", 'torch.Generator(device="cuda")'))
    with pytest.raises(ProblemError, match="needs --target cuda .* or --target hip"):
        load_problem(task, "cpu")
    assert load_problem(task, "cuda").name == "scale"


def test_kernelbench_shapes_are_told_apart_by_their_seed() -> None:
    spec = load_problem(FIXTURES / "kernelbench" / "linear_relu.py")
    labels = [spec.shape_label(t) for t in spec.tests]
    assert labels == ["seed=42", "seed=1234", "seed=7"]


def test_a_problem_without_seeds_says_what_to_give() -> None:
    """`eval FILE` on a KernelBench file said "no seed for 'cpu' (seeds: none)"."""
    spec = load_problem(FIXTURES / "kernelbench" / "linear_relu.py")
    with pytest.raises(ProblemError, match=r"no seed kernel: give a file that defines class ModelNew .*--seed"):
        spec.seed_for("cpu")
    with pytest.raises(ProblemError, match=r"vector_add has no seed for 'cpu:cutlass' \(seeds: cpu, "):
        load_problem("vector_add").seed_for("cpu", "cutlass")


def test_unknown_problem_lists_bundled_ones() -> None:
    with pytest.raises(ProblemError, match="bundled: .*vector_add"):
        load_problem("no_such_problem")


def test_not_a_kernelbench_file(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text("def get_inputs():\n    return []\n")
    with pytest.raises(ProblemError, match="missing"):
        load_problem(path)


def test_size_expressions_are_arithmetic_only() -> None:
    assert eval_size_expression("2*m*n*k", {"m": 2, "n": 3, "k": 4}) == 48
    assert eval_size_expression("ceil(n / 128) * 4", {"n": 130}) == 8
    assert eval_size_expression(12, {}) == 12
    with pytest.raises(ProblemError):
        eval_size_expression("__import__('os').system('true')", {})
    with pytest.raises(ProblemError, match="unknown name"):
        eval_size_expression("m * q", {"m": 1})


@pytest.mark.slow
def test_a_submission_imports_the_utils_py_its_task_yml_takes_from_elsewhere(tmp_path: Path) -> None:
    """The linalg layout: utils.py two folders away, named in task.yml's `files:`. The runner sees only
    the problem's folder and its parent; the judge hands it that module's text."""
    root = tmp_path / "problems"
    root.mkdir()
    task = _foreign_problem(root)
    shared = tmp_path / "pmpp_v2"
    shared.mkdir()
    (root / "utils.py").rename(shared / "utils.py")
    (shared / "utils.py").write_text((shared / "utils.py").read_text() + "\nFACTOR = 2\n")
    yml = task / "task.yml"
    yml.write_text(yml.read_text().replace(
        'files:\n', 'files:\n  - {"name": "utils.py", "source": "../../pmpp_v2/utils.py"}\n'
    ))  # fmt: skip
    (task / "submission.py").write_text(
        "from task import input_t, output_t\nfrom utils import FACTOR\n\n"
        "def custom_kernel(data: input_t) -> output_t:\n    return data * FACTOR\n"
    )
    verdict = evaluate(task, task / "submission.py", CHECK)
    assert verdict.status == Status.ok, verdict.message
