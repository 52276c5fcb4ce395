"""Limits enforced from outside the judge and the runner, the protections a verdict states, the
advisory static scan, and the GPU's tricks (marked gpu). The CPU red-team set is tests/test_redteam.py."""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate, network_isolation
from sandbox.integrity import ERROR, WARNING, Policy, scan_source
from sandbox.judge import isolation
from sandbox.verdict import Status

ADV = Path(__file__).parent / "adversarial"
ROOT = Path(__file__).resolve().parent.parent
FAST = {"budget_s": 0.15, "warmup_s": 0.0, "min_reps": 12}


def _options(target: str, mode: str, **extra) -> EvalOptions:
    return EvalOptions(
        target=target, mode=mode, timing=FAST, limits=PhaseLimits(build=300, check=60, time=120), **extra
    )


@pytest.mark.slow
def test_unbounded_memory_is_stopped_at_the_limit() -> None:
    verdict = evaluate("vector_add", ADV / "unbounded_memory.py", _options("cpu", "check", memory_limit_mb=1500))
    assert verdict.status == Status.resource_limit, verdict.message
    assert "1500 MB limit" in verdict.message and "check" in verdict.message


@pytest.mark.slow
def test_memory_parked_in_files_no_process_maps_is_stopped_at_the_limit() -> None:
    from sandbox.judge.cgroups import MEMORY, LimitGroup

    probe = LimitGroup.create(MEMORY, None)
    if probe is None:
        pytest.skip("no memory group can be made here: the limit counts resident pages only (docs/INTEGRITY.md)")
    probe.remove()
    verdict = evaluate("vector_add", ADV / "rt_memory_memfd_park.py", _options("cpu", "check", memory_limit_mb=1500))
    assert verdict.status == Status.resource_limit, (verdict.status, verdict.message)
    assert "1500 MB limit" in verdict.message and "memory group" in verdict.message
    assert "capped at 1500 MB" in verdict.integrity.protections["memory"]


@pytest.mark.slow
def test_the_candidates_compiler_counts_against_its_memory_limit() -> None:
    from sandbox.judge.cgroups import MEMORY, LimitGroup

    probe = LimitGroup.create(MEMORY, None)
    if probe is None or probe.kind != "v1":
        pytest.skip("the compiler joins the runner's memory group on cgroup v1 hosts")
    probe.remove()
    verdict = evaluate("vector_add", ADV / "rt_memory_compiler.py", _options("cpu", "check", memory_limit_mb=2048))
    assert verdict.status == Status.resource_limit, (verdict.status, verdict.message)
    assert "2048 MB limit" in verdict.message and "memory group" in verdict.message


@pytest.mark.slow
def test_a_fork_bomb_is_held_at_the_runners_task_limit() -> None:
    from sandbox.judge.cgroups import TASKS, LimitGroup

    probe = LimitGroup.create(TASKS, None)
    if probe is None:
        pytest.skip("no task group can be made here: the kernel would fork 6,000 processes unchecked")
    probe.remove()
    verdict = evaluate("vector_add", ADV / "rt_limits_fork_bomb.py", _options("cpu", "check"))
    assert verdict.status == Status.resource_limit, (verdict.status, verdict.message)
    assert "processes and threads" in verdict.message and "at most" in verdict.integrity.protections["tasks"]


@pytest.mark.slow
def test_a_base_that_reaches_its_runners_limits_leaves_the_candidates_verdict_alone() -> None:
    from sandbox.judge.cgroups import TASKS, LimitGroup

    probe = LimitGroup.create(TASKS, None)
    if probe is None:
        pytest.skip("no task group can be made here")
    probe.remove()
    burst = ADV / "rt_limits_thread_burst.py"
    alone = evaluate("vector_add", burst, _options("cpu", "check"))
    assert alone.status == Status.resource_limit and "processes and threads" in alone.message, alone.message
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    verdict = evaluate("vector_add", seed, _options("cpu", "full", paired_with=burst))
    assert verdict.status == Status.ok, (verdict.status, verdict.message)
    assert any("processes and threads" in e and "nothing was paired" in e for e in verdict.errors), verdict.errors
    assert all(b.paired is None for b in verdict.benchmarks) and (verdict.summary is None or verdict.summary.paired is None)


@pytest.mark.slow
def test_a_paired_evaluation_may_hold_the_memory_limit_once_per_runner() -> None:
    # Alone, the seed's evaluation fits 1024 MB; paired with itself, judge and two runners read 1081 MB
    # against one limit for the whole tree, and an honest pair was stopped.
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    verdict = evaluate("vector_add", seed, _options("cpu", "full", memory_limit_mb=1024, paired_with=seed))
    assert verdict.status == Status.ok, (verdict.status, verdict.message)


@pytest.mark.slow
def test_a_good_candidate_after_a_memory_hog() -> None:
    evaluate("vector_add", ADV / "unbounded_memory.py", _options("cpu", "check", memory_limit_mb=1500))
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    assert evaluate("vector_add", seed, _options("cpu", "check")).status == Status.ok


@pytest.mark.slow
@pytest.mark.skipif(not (isolation.probe().available or network_isolation()), reason="no network namespace here")
def test_candidate_has_no_network(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[object] = []
    thread = threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True)
    thread.start()
    probe = tmp_path / "probe.py"  # the port travels in the source: a runner's environment is the judge's choice
    probe.write_text((ADV / "open_network.py").read_text().replace('os.environ.get("KS_TEST_NET_PORT", "9")', str(port)))
    try:
        verdict = evaluate("vector_add", probe, _options("cpu", "check"))
    finally:
        server.close()
    assert verdict.status == Status.runtime_error
    assert "network probe: refused" in verdict.message, verdict.message
    assert not accepted
    isolated = verdict.integrity.protections["runner"].startswith("bubblewrap")
    assert isolated or verdict.integrity.protections["network"] == "isolated (unshare -n)"
    assert any(f.rule == "module-socket" for f in verdict.integrity.findings)


@pytest.mark.slow
def test_verdict_states_the_protections_in_force() -> None:
    seed = ROOT / "problems" / "vector_add" / "seeds" / "cpu.py"
    verdict = evaluate("vector_add", seed, _options("cpu", "check", memory_limit_mb=4096, open_files=512))
    guards = verdict.integrity.protections
    assert guards["memory_limit_mb"] == 4096 and guards["open_files_limit"] == 512
    assert guards["judge_outside_candidate"] and guards["static_scan"] == "advisory"
    assert guards["runner"].startswith(("bubblewrap", "not isolated"))
    assert guards["library_use"].startswith(("sampled from outside the runner", "not sampled"))


def test_static_scan_is_advice_with_reasons() -> None:
    source = (
        "import gc, threading\nimport time as t\nfrom reference import ref_kernel\n"
        "t.perf_counter = lambda: 0\nx = gc.get_objects()\nopen('request.json')\n"
        "import torch\ny = torch.matmul(1, 2)\nz = a @ b\nclass K: pass\nK.__subclasses__()\n"
    )
    findings = scan_source(source, Policy(forbidden_ops=["mm", "matmul"]))
    rules = {f.rule for f in findings}
    assert {"reference-call", "timer-patch", "introspection", "harness-file", "module-threading", "forbidden-op"} <= rules
    assert all(f.severity == WARNING and f.reason and f.line for f in findings)
    lines = {f.rule: f.line for f in findings}
    assert lines["timer-patch"] == 4 and lines["harness-file"] == 6
    syntax = scan_source("def f(:\n")[0]
    assert syntax.rule == "syntax" and syntax.severity == ERROR


# -- on the GPU -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize(
    "problem, name, mode, statuses, words",
    [
        ("vector_add", "side_stream_escape", "full", {Status.rejected}, "outside the measured region"),
        ("vector_add", "cache_by_pointer_gpu", "full", {Status.rejected, Status.wrong_output}, "expected"),
        ("softmax", "stale_memory", "check", {Status.wrong_output}, "worst element"),
        # cuBLAS through torch and through CuPy, told by its pages the runner mapped (no perf on these hosts)
        ("matmul_bf16", "rt_gpu_library_linear", "check", {Status.rejected}, "libcublas"),
        ("matmul_bf16", "rt_gpu_library_cupy", "check", {Status.rejected}, "libcublas"),
    ],
    ids=["side_stream_escape", "cache_by_pointer_gpu", "stale_memory", "library_linear", "library_cupy"],
)
def test_trick_is_caught_on_gpu(problem: str, name: str, mode: str, statuses: set[Status], words: str) -> None:
    verdict = evaluate(problem, ADV / f"{name}.py", _options("cuda", mode))
    detail = verdict.message + " | " + " | ".join(t.message for t in verdict.tests if not t.passed)
    assert verdict.status in statuses, (verdict.status, detail, verdict.errors)
    assert words in detail, detail


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.parametrize("problem, name", [("vector_add", "legit_cuda_persistent"),
                                           ("vector_add", "legit_cuda_side_stream_joined"),
                                           ("vector_add", "legit_cuda_graph_replay"),
                                           ("softmax", "legit_rt_persistent_out"),  # one buffer returned by every call
                                           ("vector_add", "legit_gpu_cupy_rawkernel")])  # CuPy, NVRTC in the runner
def test_clever_but_legitimate_gpu_kernels_pass(problem: str, name: str) -> None:
    verdict = evaluate(problem, ADV / f"{name}.py", _options("cuda", "full"))
    assert verdict.status == Status.ok, (verdict.message, verdict.errors)


@pytest.mark.slow
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
