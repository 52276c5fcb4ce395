"""Two GPUs of one host (marked gpu; skipped with fewer than two, or without the runner's sandbox):
a candidate given one GPU opens no other, and leaves a timing on another GPU as it is alone.

Both rest on the sandbox's device nodes (sandbox/judge/isolation.py `gpu_nodes`): a runner sees its
own GPU's node and the driver's shared ones, so no process it starts can open another GPU."""

from __future__ import annotations

import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate
from sandbox.judge import isolation
from sandbox.verdict import Status, Verdict

ADV = Path(__file__).parent / "adversarial"
SEED = Path(__file__).resolve().parent.parent / "problems" / "vector_add" / "seeds" / "cuda.py"
FAST = {"budget_s": 0.15, "warmup_s": 0.0, "min_reps": 12}


def _gpus() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    return listed.stdout.count("GPU ") if listed.returncode == 0 else 0


pytestmark = [
    pytest.mark.slow,
    pytest.mark.gpu,
    pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs"),
    pytest.mark.skipif(not isolation.probe().available, reason="needs the runner's sandbox (bubblewrap)"),
]


def _evaluate(submission: Path, gpu: int, mode: str = "full") -> Verdict:
    options = EvalOptions(target="cuda", mode=mode, gpu=gpu, timing=FAST, limits=PhaseLimits(build=300, check=90, time=120))
    return evaluate("vector_add", submission, options)


def _utilisation(gpu: int) -> int:
    """The GPU's busy share (%) as the driver samples it; nvidia-smi counts GPUs in PCI order, as the
    evaluator's workers do."""
    out = subprocess.run(["nvidia-smi", "-i", str(gpu), "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20)
    return int(out.stdout.strip() or 0)


@pytest.mark.parametrize("gpu", [0, 1])
def test_a_runner_given_one_gpu_opens_no_other(gpu: int) -> None:
    verdict = _evaluate(ADV / "rt_gpu_other_device.py", gpu, mode="check")
    assert verdict.status == Status.ok, (verdict.status, verdict.message, verdict.log_tail[-2000:])
    assert "own GPU's device node only" in verdict.integrity.protections["devices"]


def test_a_candidate_on_gpu1_leaves_a_timing_on_gpu0_as_it_is_alone() -> None:
    alone = _evaluate(SEED, 0)
    assert alone.status == Status.ok, alone.message
    with ThreadPoolExecutor(max_workers=1) as pool:
        hog = pool.submit(_evaluate, ADV / "rt_gpu_hog_other_device.py", 1)
        time.sleep(12)  # the hog's runner has started its work on every GPU it can open, and lingers 30 s
        beside = _evaluate(SEED, 0)
        busy = _utilisation(1)
        hog.result()
    assert beside.status == Status.ok, beside.message
    assert busy >= 50, f"the candidate on GPU 1 was not at work while GPU 0 timed ({busy}% busy)"
    ratios = {b.shape: round(b.median_us / a.median_us, 3) for a, b in zip(alone.benchmarks, beside.benchmarks, strict=True)}
    assert all(0.9 < r < 1.1 for r in ratios.values()), ratios
