"""The CUDA target on a real GPU (marked `gpu`; skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate
from sandbox.problem import bundled_problems, load_problem
from sandbox.verdict import Status
from tests.candidates import write_broken

pytestmark = pytest.mark.gpu

FAST = {"budget_s": 0.3, "warmup_s": 0.02}
CUDA_SEEDS = [
    (name, key.partition(":")[2] or None)
    for name, path in bundled_problems().items()
    for key in load_problem(path, "cuda").seeds
    if key.split(":")[0] == "cuda"
]
CHECK = EvalOptions(target="cuda", mode="check", limits=PhaseLimits(build=600, check=60, time=300))


@pytest.mark.parametrize("name, variant", CUDA_SEEDS, ids=[f"{n}-{v or 'cuda'}" for n, v in CUDA_SEEDS])
def test_cuda_seed_passes_within_speed_of_light(name: str, variant: str | None) -> None:
    seed = load_problem(name, "cuda").seed_for("cuda", variant)
    verdict = evaluate(name, seed, EvalOptions(target="cuda", timing=FAST))
    assert verdict.status == Status.ok, verdict.message + "\n" + "\n".join(verdict.errors)
    assert verdict.environment["device_kind"] == "cuda" and verdict.environment["driver"]
    for bench in verdict.benchmarks:
        assert bench.median_us > 0 and bench.reference_median_us
        if bench.pct_sol is not None:
            assert bench.pct_sol <= 100.0, (bench.shape, bench.pct_sol)


@pytest.mark.parametrize("name", ["vector_add", "softmax", "rmsnorm", "fp8_blockscale_gemm", "mla_decode", "moe"])
@pytest.mark.parametrize("kind", ["wrong_values", "unwritten_output", "wrong_shape"])
def test_wrong_outputs_fail_on_gpu(name: str, kind: str, tmp_path: Path) -> None:
    seed = load_problem(name, "cuda").seed_for("cuda")
    verdict = evaluate(name, write_broken(tmp_path, seed, kind), CHECK)
    assert verdict.status == Status.wrong_output, (verdict.status, verdict.message)


def test_unwritten_elements_read_as_nan_on_gpu(tmp_path: Path) -> None:
    # softmax returns a fresh tensor: freed memory of its size was poisoned with NaN.
    seed = load_problem("softmax", "cuda").seed_for("cuda")
    verdict = evaluate("softmax", write_broken(tmp_path, seed, "unwritten_output"), CHECK)
    assert verdict.status == Status.wrong_output
    assert any("unwritten" in t.message for t in verdict.tests if not t.passed), verdict.tests


ILLEGAL_ACCESS = '''
from sandbox.native import load_cuda

lib = load_cuda(r"""
#include <cstdint>
__global__ void bad(float* out) { out[(int64_t)1 << 40] = 1.0f; }
extern "C" void run(float* out) { bad<<<1, 1>>>(out); }
""", name="illegal")


def custom_kernel(data):
    a, b, out = data
    lib.run(out)
    return out
'''

SPIN = '''
from sandbox.native import load_cuda

lib = load_cuda(r"""
__global__ void spin(volatile int* flag) { while (flag[0] == 0) { } }
extern "C" void run(int* flag) { spin<<<1, 1>>>(flag); }
""", name="spin")
import torch


def custom_kernel(data):
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    lib.run(flag)
    return data[2]
'''


def test_illegal_memory_access_then_a_good_candidate(tmp_path: Path) -> None:
    bad = tmp_path / "illegal.py"
    bad.write_text(ILLEGAL_ACCESS)
    verdict = evaluate("vector_add", bad, CHECK)
    assert verdict.status in (Status.runtime_error, Status.crash)
    assert "illegal memory access" in (verdict.message + " ".join(verdict.errors)).lower()
    good = evaluate("vector_add", load_problem("vector_add", "cuda").seed_for("cuda"), CHECK)
    assert good.status == Status.ok, good.message


def test_kernel_that_never_ends_is_killed_then_gpu_is_usable(tmp_path: Path) -> None:
    spin = tmp_path / "spin.py"
    spin.write_text(SPIN)
    options = EvalOptions(target="cuda", mode="check", limits=PhaseLimits(build=600, check=10, time=60))
    verdict = evaluate("vector_add", spin, options)
    assert verdict.status == Status.timeout and "check phase" in verdict.message
    good = evaluate("vector_add", load_problem("vector_add", "cuda").seed_for("cuda"), CHECK)
    assert good.status == Status.ok, good.message


def test_cuda_build_is_cached_across_workers() -> None:
    seed = load_problem("vector_add", "cuda").seed_for("cuda")
    evaluate("vector_add", seed, CHECK)
    again = evaluate("vector_add", seed, CHECK)
    assert again.status == Status.ok and again.build.cached
    assert all(r.lang == "cuda" for r in again.build.records)


def test_a_gpu_runners_digest_is_the_judges() -> None:
    # The runner commits on its GPU; the judge may check a delivered output on the host. Both must
    # give the same value (integer arithmetic that wraps alike on both).
    import torch

    from sandbox.shared.blend import digest

    for numel, dtype in [(64, torch.float32), (4097 * 64 + 5, torch.bfloat16), (3 << 20, torch.float32), (999, torch.float16)]:
        host = torch.randn(numel).to(dtype)
        device = host.cuda()
        assert digest([device]) == digest([host]), (numel, dtype)


@pytest.mark.parametrize("rows", [65, 66, 127, 129, 2049, 4095, 4097, 64 * 64 * 64 + 3, 262_144, 300_001])
def test_the_gpu_fold_is_the_torch_tree(rows: int) -> None:
    # One program folds up to six levels of a block; every count of rows (odd ones at some level,
    # a short last block, one launch or several) must come to the torch tree's rows bit for bit.
    import torch

    from sandbox.shared.blend import _K1, _K2, LANES, TOP_ROWS, torch_tree
    from sandbox.shared.fold import fold

    words = torch.randint(-(1 << 62), 1 << 62, (rows, LANES), dtype=torch.int64, device="cuda")
    folded = fold(words, TOP_ROWS, _K1, _K2)
    assert folded is not None
    assert torch.equal(folded, torch_tree(words))


def test_the_device_arena_is_one_block_two_processes_see() -> None:
    """The judge's arena on a GPU: what one process writes into the block, the other reads, both ways,
    with no trip through host memory."""
    import subprocess
    import sys

    import torch

    from sandbox.shared.arena import DeviceArena

    arena = DeviceArena.create_on(1 << 20, "cuda:0")
    spec = {"dtype": "float32", "shape": [1024], "stride": [1], "offset": 4096}
    arena.view(spec).copy_(torch.arange(1024, dtype=torch.float32, device="cuda:0"))
    torch.cuda.synchronize()
    child = (
        "import json, sys, torch\n"
        "from sandbox.shared.arena import DeviceArena\n"
        "arena = DeviceArena.attach_to(json.loads(sys.argv[1]), 'cuda:0')\n"
        "spec = {'dtype': 'float32', 'shape': [1024], 'stride': [1], 'offset': 4096}\n"
        "seen = arena.view(spec)\n"
        "assert seen.device.type == 'cuda' and float(seen.sum()) == 1023 * 1024 / 2, float(seen.sum())\n"
        "seen.mul_(2)\n"
        "torch.cuda.synchronize()\n"
    )
    import json

    done = subprocess.run([sys.executable, "-c", child, json.dumps(arena.describe())], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert torch.equal(arena.view(spec), 2 * torch.arange(1024, dtype=torch.float32, device="cuda:0"))
    with pytest.raises(Exception, match="outside the arena"):
        arena.view(dict(spec, offset=arena.size))
    arena.close()


def test_a_gpu_evaluation_moves_its_data_through_device_memory() -> None:
    seed = load_problem("vector_add", "cuda").seed_for("cuda")
    verdict = evaluate("vector_add", seed, EvalOptions(target="cuda", timing=FAST))
    assert verdict.status == Status.ok, verdict.message
    assert verdict.timing_method and "device memory" in verdict.timing_method["data"], verdict.timing_method


def test_a_warm_gpu_evaluation_takes_the_calibration_its_standby_made() -> None:
    # The standby judge times the no-op on the warm problem's shapes before its request, with the runner it
    # started for it (sandbox/judge/ahead.py): the request's build phase no longer holds the GPU for that.
    import time

    from sandbox.evaluator import prepare_workers, shutdown_standby_workers

    options = EvalOptions(target="cuda", keep_warm=True, timing=FAST, gpu=0)  # a device lock to wait on
    seed = load_problem("vector_add", "cuda").seed_for("cuda")
    try:
        evaluate("vector_add", seed, options)
        prepare_workers("vector_add", options)
        time.sleep(10)
        verdict = evaluate("vector_add", seed, options)
    finally:
        shutdown_standby_workers()
    assert verdict.status == Status.ok, verdict.message
    assert "calibrated by the standby" in (verdict.timing_method or {}).get("calibration", ""), verdict.timing_method
