"""The adversarial suite: every known trick is rejected with a readable reason,
and legitimately clever kernels pass. GPU-only tricks carry the gpu mark."""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate, network_isolation
from sandbox.integrity import ERROR, WARNING, Policy, scan_source
from sandbox.verdict import Status

ADV = Path(__file__).parent / "adversarial"
ROOT = Path(__file__).resolve().parent.parent
FAST = {"budget_s": 0.15, "warmup_s": 0.0, "min_reps": 12}


def _options(target: str, mode: str, **extra) -> EvalOptions:
    return EvalOptions(
        target=target, mode=mode, timing=FAST, limits=PhaseLimits(build=300, check=60, time=120), **extra
    )


# (problem, candidate file, mode, expected status, words the reason must contain)
CPU_TRICKS = [
    ("softmax", "stale_memory", "check", Status.wrong_output, "worst element"),
    ("vector_add", "mutate_inputs", "check", Status.rejected, "changed input #0"),
    ("vector_add", "cache_by_pointer", "full", Status.rejected, "timed repetition"),
    ("vector_add", "cache_by_shape", "full", Status.rejected, "timed repetition"),
    ("vector_add", "cache_global", "full", Status.rejected, "timed repetition"),
    ("softmax", "first_row_only", "check", Status.wrong_output, "out of tolerance"),
    ("vector_add", "constant_output", "check", Status.wrong_output, "out of tolerance"),
    ("vector_add", "thread_left_running", "check", Status.rejected, "left thread(s) running"),
    ("vector_add", "lazy_subclass", "check", Status.rejected, "subclass"),
    ("vector_add", "patch_timer_static", "check", Status.rejected, "replaces time.perf_counter_ns"),
    ("vector_add", "patch_timer_hidden", "check", Status.rejected, "replaced time.perf_counter_ns"),
    ("vector_add", "patch_cuda_event", "check", Status.rejected, "replaces torch.cuda.Event"),
    ("vector_add", "call_reference_static", "check", Status.rejected, "reference"),
    ("vector_add", "call_reference_hidden", "check", Status.rejected, "called the problem's reference"),
    ("vector_add", "library_op", "check", Status.rejected, "add"),
    ("matmul_bf16", "library_matmul", "check", Status.rejected, "mm"),
    ("softmax", "lower_precision", "check", Status.wrong_output, "out of tolerance"),
    ("vector_add", "read_harness_file", "check", Status.rejected, "request.json"),
    ("softmax", "read_reference_memory", "check", Status.rejected, "gc.get_objects"),
]


@pytest.mark.parametrize("problem, name, mode, status, words", CPU_TRICKS, ids=[t[1] for t in CPU_TRICKS])
def test_trick_is_caught_on_cpu(problem: str, name: str, mode: str, status: Status, words: str) -> None:
    verdict = evaluate(problem, ADV / f"{name}.py", _options("cpu", mode))
    detail = verdict.message + " | " + " | ".join(t.message for t in verdict.tests if not t.passed)
    assert verdict.status == status, (verdict.status, detail, verdict.errors)
    assert words in detail, detail
    if status == Status.rejected:
        assert verdict.integrity.violation is not None and verdict.integrity.violation.reason


@pytest.mark.parametrize(
    "problem, name", [("vector_add", "legit_inplace_add"), ("softmax", "legit_softmax_workspace")]
)
def test_clever_but_legitimate_kernels_pass(problem: str, name: str) -> None:
    verdict = evaluate(problem, ADV / f"{name}.py", _options("cpu", "full"))
    assert verdict.status == Status.ok, (verdict.message, verdict.errors)
    assert verdict.integrity.violation is None


def test_unbounded_memory_is_stopped_at_the_limit() -> None:
    verdict = evaluate("vector_add", ADV / "unbounded_memory.py", _options("cpu", "check", memory_limit_mb=1500))
    assert verdict.status == Status.resource_limit, verdict.message
    assert "1500 MB limit" in verdict.message and "check" in verdict.message


def test_a_good_candidate_after_a_memory_hog() -> None:
    evaluate("vector_add", ADV / "unbounded_memory.py", _options("cpu", "check", memory_limit_mb=1500))
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    assert evaluate("vector_add", seed, _options("cpu", "check")).status == Status.ok


@pytest.mark.skipif(not network_isolation(), reason="unshare -n is not permitted here")
def test_candidate_has_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    monkeypatch.setenv("KS_TEST_NET_PORT", str(port))
    try:
        verdict = evaluate("vector_add", ADV / "open_network.py", _options("cpu", "check"))
    finally:
        server.close()
    assert verdict.status == Status.runtime_error
    assert "network probe: refused" in verdict.message, verdict.message
    assert not accepted
    assert verdict.integrity.protections["network"] == "isolated (unshare -n)"
    assert any(f.rule == "module-socket" for f in verdict.integrity.findings)


def test_verdict_states_the_protections_in_force() -> None:
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    verdict = evaluate("vector_add", seed, _options("cpu", "check", memory_limit_mb=4096, open_files=512))
    guards = verdict.integrity.protections
    assert guards["memory_limit_mb"] == 4096 and guards["open_files_limit"] == 512
    assert guards["scrubbed_environment"] and guards["own_process_per_candidate"] and guards["static_scan"]
    assert guards["network"] in ("isolated (unshare -n)", "not isolated")


def test_static_scan_reasons_and_severities() -> None:
    source = (
        "import gc, threading\nimport time as t\nfrom reference import ref_kernel\n"
        "t.perf_counter = lambda: 0\nx = gc.get_objects()\nopen('request.json')\n"
        "import torch\ny = torch.matmul(1, 2)\nz = a @ b\n"
    )
    findings = scan_source(source, Policy(forbidden_ops=["mm", "matmul"]))
    by_rule = {(f.rule, f.severity) for f in findings}
    assert ("reference-call", ERROR) in by_rule
    assert ("timer-patch", ERROR) in by_rule
    assert ("introspection", ERROR) in by_rule
    assert ("harness-file", ERROR) in by_rule
    assert ("module-threading", WARNING) in by_rule
    assert ("forbidden-op", WARNING) in by_rule
    lines = {f.rule: f.line for f in findings if f.severity == ERROR}
    assert lines["timer-patch"] == 4 and lines["harness-file"] == 6
    assert all(f.reason for f in findings)
    assert scan_source("def f(:\n")[0].rule == "syntax"


def test_bundled_seeds_have_no_static_errors() -> None:
    for seed in (ROOT / "problems").glob("*/seeds/*.py"):
        errors = [f for f in scan_source(seed.read_text()) if f.severity == ERROR]
        assert not errors, (seed, errors)


# -- on the GPU -------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "problem, name, mode, status, words",
    [
        ("vector_add", "side_stream_escape", "full", Status.rejected, "stream"),
        ("softmax", "stale_memory", "check", Status.wrong_output, "worst element"),
        ("vector_add", "cache_by_pointer_gpu", "full", Status.rejected, "timed repetition"),
        ("vector_add", "library_op", "check", Status.rejected, "add"),
    ],
    ids=["side_stream_escape", "stale_memory", "cache_by_pointer_gpu", "library_op"],
)
def test_trick_is_caught_on_gpu(problem: str, name: str, mode: str, status: Status, words: str) -> None:
    verdict = evaluate(problem, ADV / f"{name}.py", _options("cuda", mode))
    detail = verdict.message + " | " + " | ".join(t.message for t in verdict.tests if not t.passed)
    assert verdict.status == status, (verdict.status, detail, verdict.errors)
    assert words in detail, detail


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["legit_cuda_persistent", "legit_cuda_side_stream_joined"])
def test_clever_but_legitimate_gpu_kernels_pass(name: str) -> None:
    verdict = evaluate("vector_add", ADV / f"{name}.py", _options("cuda", "full"))
    assert verdict.status == Status.ok, (verdict.message, verdict.errors)


@pytest.mark.gpu
def test_result_faster_than_light_is_rejected(tmp_path: Path) -> None:
    shutil.copy(ROOT / "problems" / "utils.py", tmp_path / "utils.py")
    problem = tmp_path / "vector_add"
    shutil.copytree(ROOT / "problems" / "vector_add", problem)
    task = problem / "task.yml"
    # Claim each element moves a megabyte: any real kernel now beats "physics".
    task.write_text(task.read_text().replace('bytes: "12 * size"', 'bytes: "1000000 * size"'))
    verdict = evaluate(problem, problem / "seeds" / "cuda.py", _options("cuda", "full"))
    assert verdict.status == Status.rejected
    assert "speed of light" in verdict.message
