"""Time to verdict with a warm evaluator: a judge (and its runner) started ahead of the request.

    python bench/verdict_time.py --problem vector_add --target cpu --repeats 5
    python bench/verdict_time.py --root ../old-checkout ...     # the same measurement of another checkout

Each repetition evaluates the problem's seed with `keep_warm=True` after `--settle` seconds, so
the standby judge has imported torch, bound the reference and started its runner. `--root`
runs the same script against another checkout (its own `sandbox` package): two designs measured
side by side on one machine, interleaved when `--compare` names the other root.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(problem: str, target: str, repeats: int, settle: float, budget: float) -> dict[str, object]:
    from sandbox.evaluator import EvalOptions, evaluate, prepare_workers, shutdown_standby_workers
    from sandbox.problem import load_problem

    seed = load_problem(problem, target).seed_for(target)
    options = EvalOptions(target=target, keep_warm=True, timing={"budget_s": budget, "warmup_s": 0.02})
    evaluate(problem, seed, options)  # builds the seed into the cache, starts the first standby
    walls, statuses = [], []
    for _ in range(repeats):
        prepare_workers(problem, options)
        time.sleep(settle)
        started = time.perf_counter()
        verdict = evaluate(problem, seed, options)
        walls.append(time.perf_counter() - started)
        statuses.append(verdict.status.value)
    shutdown_standby_workers()
    return {"problem": problem, "target": target, "budget_s": budget, "walls_s": [round(w, 3) for w in walls],
            "median_s": round(statistics.median(walls), 3), "statuses": statuses}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", default="vector_add")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--settle", type=float, default=8.0, help="seconds for the standby to warm up")
    parser.add_argument("--budget", type=float, default=0.25, help="timing seconds per shape")
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose sandbox is measured")
    parser.add_argument("--compare", default=None, help="another checkout, measured in turn with this one")
    parser.add_argument("--rounds", type=int, default=1, help="with --compare: alternations of the two")
    args = parser.parse_args()
    if args.compare is None:
        sys.path.insert(0, args.root)
        print(json.dumps(measure(args.problem, args.target, args.repeats, args.settle, args.budget)))
        return
    results: dict[str, list[float]] = {args.root: [], args.compare: []}
    for _ in range(args.rounds):
        for root in (args.root, args.compare):
            out = subprocess.run(
                [sys.executable, __file__, "--problem", args.problem, "--target", args.target, "--repeats",
                 str(args.repeats), "--settle", str(args.settle), "--budget", str(args.budget), "--root", root],
                capture_output=True, text=True, cwd=root, check=True,
            )
            results[root] += json.loads(out.stdout.strip().splitlines()[-1])["walls_s"]
    print(json.dumps({root: {"walls_s": walls, "median_s": round(statistics.median(walls), 3)}
                      for root, walls in results.items()}, indent=1))


if __name__ == "__main__":
    main()
