"""Time to verdict from a cold start: a fresh process evaluates a problem's seed with no worker started ahead.

    python bench/cold_verdicts.py [--problem softmax] [--mode check] [--pairs 6] [--compare ../old-checkout]

This is what each evaluation of a CPU run costs (a run keeps no standby worker on the CPU, where its warm-up would
compete with the timing), and what every evaluation in the test suite costs. Each repetition is a new Python
process running `evaluate` once, with this checkout's `sandbox` on its path; `--compare` alternates with another
checkout, pair by pair, so both meet the same host. Prints each pair and the medians, in seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_ONE = """
import sys, time
from sandbox.evaluator import EvalOptions, evaluate
from sandbox.problem import load_problem
problem, mode = sys.argv[1], sys.argv[2]
seed = load_problem(problem, "cpu").seed_for("cpu")
started = time.perf_counter()
verdict = evaluate(problem, seed, EvalOptions(target="cpu", mode=mode, timing={"budget_s": 0.15, "warmup_s": 0.0}))
print(f"{time.perf_counter() - started:.3f} {verdict.status.value}")
"""


def once(root: Path, problem: str, mode: str) -> float:
    """Seconds from `evaluate` to the verdict, in a new process importing `root`'s packages."""
    done = subprocess.run([sys.executable, "-c", _ONE, problem, mode], cwd=root, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(root)), timeout=600)
    seconds, status = done.stdout.split()[-2:] if done.returncode == 0 and done.stdout.split() else ("nan", "failed")
    if status != "ok":
        raise SystemExit(f"{root}: the seed's verdict was {status}: {done.stderr[-2000:]}")
    return float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="softmax")
    parser.add_argument("--mode", default="check", choices=["check", "full"])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--compare", type=Path, help="another checkout, measured in turns with this one")
    args = parser.parse_args()
    roots = [ROOT] + ([args.compare.resolve()] if args.compare else [])
    times: dict[Path, list[float]] = {root: [] for root in roots}
    for pair in range(args.pairs):
        for root in roots if pair % 2 == 0 else roots[::-1]:
            times[root].append(once(root, args.problem, args.mode))
        print("  ".join(f"{root.name}: {times[root][-1]:.2f} s" for root in roots), flush=True)
    for root in roots:
        print(f"{root}: median {statistics.median(times[root]):.2f} s, range {min(times[root]):.2f}-"
              f"{max(times[root]):.2f} s over {len(times[root])}")


if __name__ == "__main__":
    main()
