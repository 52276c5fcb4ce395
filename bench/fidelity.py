"""Fidelity of GPU timings: repeatability across processes, agreement with do_bench.

    python bench/fidelity.py [--runs 5] [--problems vector_add softmax matmul_bf16]

For each problem's CUDA seed: the sandbox evaluates it `runs` times, each in a
new worker process, and the geometric means over benchmark shapes are compared
(max/min). Then, in another new process, `triton.testing.do_bench` times the same
call on the same inputs (median, its own L2 flush) and its geometric mean is
compared with each sandbox run.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def do_bench_child(problem_name: str, submission: str) -> None:
    """Run in a fresh process: do_bench median per benchmark shape, as JSON on stdout."""
    import torch
    import triton.testing

    from sandbox.judge.checks import clone as clone_data
    from sandbox.problem import load_problem

    problem = load_problem(problem_name, "cuda")
    problem.bind()
    kernel = problem.load_submission(Path(submission))
    medians = []
    for params in problem.benchmarks:
        data = clone_data(problem.generate_input(params, "cuda"))
        torch.cuda.synchronize()
        ms = triton.testing.do_bench(lambda data=data: kernel(data), warmup=100, rep=500, return_mode="median")
        medians.append(ms * 1e3)
    print(json.dumps(medians))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--problems", nargs="+", default=["vector_add", "softmax", "matmul_bf16"])
    parser.add_argument("--variant", default=None, help="seed variant, e.g. triton")
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        do_bench_child(*args.child)
        return

    from bench.common import save
    from sandbox.evaluator import EvalOptions, evaluate
    from sandbox.problem import load_problem
    from sandbox.verdict import Status

    report = {}
    for name in args.problems:
        seed = load_problem(name, "cuda").seed_for("cuda", args.variant)
        options = EvalOptions(target="cuda", timing={"budget_s": args.budget}, time_reference=False)
        geos, per_shape = [], []
        for _ in range(args.runs):
            verdict = evaluate(name, seed, options)
            if verdict.status != Status.ok:
                raise SystemExit(f"{name}: {verdict.status.value}: {verdict.message}")
            geos.append(verdict.summary.geomean_us)
            per_shape.append([b.median_us for b in verdict.benchmarks])
        child = subprocess.run(
            [sys.executable, __file__, "--child", name, str(seed)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )
        bench_medians = json.loads(child.stdout.strip().splitlines()[-1])
        bench_geo = _geomean(bench_medians)
        spread = max(geos) / min(geos)
        worst_dev = max(abs(g / bench_geo - 1) for g in geos)
        report[name] = {
            "sandbox_geomeans_us": geos,
            "sandbox_per_shape_us": per_shape,
            "do_bench_per_shape_us": bench_medians,
            "do_bench_geomean_us": bench_geo,
            "max_over_min": spread,
            "worst_deviation_from_do_bench": worst_dev,
        }
        print(
            f"{name:22s} geomeans {', '.join(f'{g:.2f}' for g in geos)} µs | max/min {spread:.4f} | "
            f"do_bench {bench_geo:.2f} µs | worst deviation {100 * worst_dev:.2f}%"
        )
    path = save("fidelity", {"runs": args.runs, "problems": report})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
