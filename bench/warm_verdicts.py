"""Warm GPU verdicts, phase by phase: where a verdict's wall time goes, and what a refusal saw.

    python bench/warm_verdicts.py --problems vector_add matmul_bf16 --repeats 3 --settle 12

Each repetition lets a standby judge warm up for `--settle` seconds (its runner started, and on a GPU
with a device lock its shapes calibrated ahead: sandbox/judge/ahead.py), then evaluates the problem's
CUDA seed and prints the wall time, the judge's phases, how its calibration was made, and per shape
the runner's and the judge's figures with the bound's allowance (a refusal's reason too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.evaluator import EvalOptions, evaluate, prepare_workers, shutdown_standby_workers  # noqa: E402
from sandbox.problem import load_problem  # noqa: E402
from sandbox.verdict import Verdict  # noqa: E402


def describe(name: str, verdict: Verdict, wall: float) -> list[str]:
    violation = verdict.integrity.violation
    lines = [f"== {name}: {verdict.status.value} {violation.rule if violation else ''} {wall:.2f} s "
             f"phases={json.dumps(verdict.phases)} calibration: {(verdict.timing_method or {}).get('calibration')}"]
    if violation is not None:
        lines.append(f"   refused on {violation.shape}: {violation.reason[:600]}")
    for bench in verdict.benchmarks:
        judge = bench.judge or {}
        lines.append(f"   {bench.shape}: runner {bench.median_us} µs, judge {bench.judge_median_us} µs, allowed "
                     f"{judge.get('allowed_us')} µs, overhead {judge.get('overhead_us')} µs a batch, {bench.reps} calls")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=["vector_add", "matmul_bf16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settle", type=float, default=12.0, help="seconds the standby gets before its request")
    parser.add_argument("--gpu", type=int, default=0, help="physical GPU index (its device lock lets the standby "
                                                           "calibrate ahead)")
    parser.add_argument("--budget", type=float, default=0.25, help="timing seconds per shape")
    args = parser.parse_args()
    for name in args.problems:
        seed = load_problem(name, "cuda").seed_for("cuda")
        options = EvalOptions(target="cuda", keep_warm=True, gpu=args.gpu,
                              timing={"budget_s": args.budget, "warmup_s": 0.02})
        evaluate(name, seed, options)  # builds the seed into the cache
        for _ in range(args.repeats):
            prepare_workers(name, options)
            time.sleep(args.settle)
            started = time.perf_counter()
            seen: list[str] = []  # when each of the judge's events arrived: the wall outside its phases

            def note(event: dict[str, object], seen: list[str] = seen, started: float = started) -> None:
                what = event.get("phase") or event.get("progress") or ("result" if "result" in event else "?")
                seen.append(f"{what} {time.perf_counter() - started:.2f}")

            verdict = evaluate(name, seed, options, on_event=note)
            print("\n".join(describe(name, verdict, time.perf_counter() - started)), flush=True)
            print("   events at s:", ", ".join(seen), flush=True)
        shutdown_standby_workers()


if __name__ == "__main__":
    main()
