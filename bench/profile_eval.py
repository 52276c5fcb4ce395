"""Where an evaluation's seconds go: start-up pieces, then a profile of the worker's run.

    python bench/profile_eval.py [PROBLEM] [--target cuda] [--mode check]

Prints the time of each start-up step of a fresh worker process (interpreter and
torch import, device context, tool probes), then profiles the judge (`sandbox.judge.evaluation`, in this process; its runner is a child)
in this process on the problem's seed (its build already cached) and prints the
slowest functions by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _seconds(command: list[str]) -> float:
    """Wall time of one command; NaN where its program is not installed here."""
    started = time.perf_counter()
    try:
        subprocess.run(command, capture_output=True, check=False)
    except FileNotFoundError:
        return float("nan")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem", nargs="?", default="vector_add")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--mode", default="check")
    parser.add_argument("--budget", type=float, default=0.25, help="timing seconds per shape")
    args = parser.parse_args()
    py = sys.executable
    steps = {
        "python -c pass": _seconds([py, "-c", "pass"]),
        "import torch": _seconds([py, "-c", "import torch"]),
    }
    if args.target != "cpu":
        steps |= {
            "import torch + CUDA context": _seconds([py, "-c", "import torch; torch.empty(1, device='cuda')"]),
            "nvidia-smi query": _seconds(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]),
            "nvcc --version": _seconds(["nvcc", "--version"]),
        }
    for name, secs in steps.items():
        print(f"{name:32s} {secs:6.2f} s")

    from sandbox.judge.evaluation import evaluate_request
    from sandbox.judge.main import _start_runner
    from sandbox.problem import load_problem

    class Quiet:
        def send(self, **event: object) -> None:
            pass

    spec = load_problem(args.problem, args.target)
    seed = spec.seed_for(args.target)
    request = {"problem": str(spec.path), "submission": str(seed), "target": args.target, "mode": args.mode,
               "timing": {"budget_s": args.budget, "warmup_s": 0.02}}
    evaluate_request(request, Quiet(), {}, {}, _start_runner)  # builds (or finds in cache)
    from sandbox.judge import libwatch

    libwatch.preload_tables()  # as a standby judge does while it waits for a request
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    result = evaluate_request(request, Quiet(), {}, {}, _start_runner)  # the judge in this process
    profiler.disable()
    print(f"judge: {time.perf_counter() - started:.2f} s, status {result['status']}, phases {result['phases']}")
    if result["status"] != "ok":
        print(f"  {result.get('message', '')[:400]}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
    print(out.getvalue()[-9000:])
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    print(out.getvalue()[-5000:])


if __name__ == "__main__":
    main()
