"""Each bundled CUDA seed evaluated under the judge, with what the bound saw per shape.

    python bench/gpu_seeds.py [PROBLEM[:VARIANT] ...]   (default: every CUDA seed of every problem)

For each: the verdict's status and wall time; per benchmark shape the runner's figure, what the judge's
clock saw beyond the calibrated overhead, the allowance, and the steps the runner says each call
took (before the call, the call on the host's clock, after it), the no-op's beside the kernel's.
A refusal prints the same from its detail. Honest seeds refused `timing-contradicted` are what this is
for (docs/BENCHMARKS.md, issue 13's eighth session).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _seeds() -> list[str]:
    from sandbox.problem import bundled_problems, load_problem

    return [f"{name}:{key.partition(':')[2]}".rstrip(":") for name, path in bundled_problems().items()
            for key in load_problem(path, "cuda").seeds if key.split(":")[0] == "cuda"]


def _steps(judge: dict[str, Any]) -> str:
    steps = judge.get("runner_steps_us") or {}
    return f"no-op {steps.get('no-op')} kernel {steps.get('kernel')}"


def main() -> None:
    from sandbox.evaluator import EvalOptions, evaluate
    from sandbox.problem import load_problem

    parser = argparse.ArgumentParser()
    parser.add_argument("seeds", nargs="*", help="PROBLEM or PROBLEM:VARIANT (default: all CUDA seeds)")
    parser.add_argument("--budget", type=float, default=0.3, help="timing seconds per shape")
    args = parser.parse_args()
    for item in args.seeds or _seeds():
        name, _, variant = item.partition(":")
        seed = load_problem(name, "cuda").seed_for("cuda", variant or None)
        started = time.perf_counter()
        verdict = evaluate(name, seed, EvalOptions(target="cuda", timing={"budget_s": args.budget, "warmup_s": 0.02}))
        print(f"== {item}: {verdict.status.value} in {time.perf_counter() - started:.1f} s: {verdict.message[:300]}", flush=True)
        violation = verdict.integrity.violation
        if violation is not None:
            judge = (violation.detail or {}).get("judge") or {}
            print(f"   refused: per call seen {judge.get('per_call_us')}, reported {judge.get('reported_per_call_us')}, "
                  f"{_steps(judge)}", flush=True)
        for bench in verdict.benchmarks:
            judge = bench.judge or {}
            print(f"   {bench.shape}: {bench.median_us:.1f} µs, judge {bench.judge_median_us or 0:.1f}, "
                  f"allowed {judge.get('allowed_us')}; {_steps(judge)}", flush=True)


if __name__ == "__main__":
    main()
