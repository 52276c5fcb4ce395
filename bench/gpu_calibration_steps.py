"""Where a GPU calibration's seconds go, step by step, for each benchmark shape of a problem.

    python bench/gpu_calibration_steps.py matmul_bf16 [--passes 2]

A standby judge calibrates every shape ahead of its request (sandbox/judge/ahead.py), holding the device
for each shape: on a busy GPU that time is the device's, taken from the evaluations. This does what
`timed.calibrated` does, with the same functions and a fresh runner, and times each step: drawing the two
sets and the reference's first output (`shapes.prepare`), each no-op batch with the check between batches,
and letting the sets go. A second pass over the same runner shows what the first paid once.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="profile the first shape's calibration (this process)")
    args = parser.parse_args()
    os.chdir(tempfile.mkdtemp(prefix="ks-calsteps-"))
    from sandbox import integrity
    from sandbox.judge import shapes, timed
    from sandbox.judge.checks import Judge
    from sandbox.judge.main import _start_runner
    from sandbox.judge.session import use_judge_kernel_cache
    from sandbox.problem import load_problem

    use_judge_kernel_cache()  # as the judge process does

    problem = load_problem(args.problem, args.target)
    problem.bind()
    gpu = args.target != "cpu"
    started = time.perf_counter()
    runner = _start_runner(problem.path if problem.path.is_dir() else problem.path.parent, gpu)
    judge = Judge(problem=problem, device="cuda:0" if gpu else "cpu", session=runner,
                  policy=integrity.Policy.from_dict(problem.integrity))
    judge.deadline = time.monotonic() + 600
    judge._ensure(1 << 20)
    print(f"runner started and greeted, arena set up: {time.perf_counter() - started:.2f} s", flush=True)
    original = timed._exercise
    exercise_s: list[float] = []

    def exercise(*a: object) -> None:
        t = time.perf_counter()
        original(*a)  # type: ignore[arg-type]
        exercise_s.append(time.perf_counter() - t)

    timed._exercise = exercise  # type: ignore[assignment]
    batch = runner.batch
    trips: list[str] = []

    def timed_batch(*a: object, **k: object) -> object:
        t = time.perf_counter()
        out = batch(*a, **k)  # type: ignore[arg-type]
        said = runner.batch_said
        trips.append(f"{time.perf_counter() - t:.3f}s" + (f" (runner said {[round(x) for x in said]} µs)" if said else ""))
        return out

    runner.batch = timed_batch  # type: ignore[method-assign]
    for run in range(args.passes):
        for params in problem.benchmarks:
            t0 = time.perf_counter()
            shape = shapes.prepare(judge, params)
            t1 = time.perf_counter()
            exercise_s.clear()
            profiler = cProfile.Profile() if args.profile and run == 0 and params is problem.benchmarks[0] else None
            if profiler is not None:
                profiler.enable()
            calibration = timed.calibrate(judge, shape)
            t2 = time.perf_counter()
            if profiler is not None:
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
                print(out.getvalue()[-7000:], flush=True)
            shapes.release(judge, shape)
            del shape
            shapes.free_device_memory(judge.device)
            t3 = time.perf_counter()
            batches = calibration.batch_us or []
            print(f"  round trips: {trips}", flush=True)
            trips.clear()
            print(f"pass {run} {problem.shape_label(params)}: prepare {t1 - t0:.3f} s, calibrate {t2 - t1:.3f} s of which checks between batches "
                  f"{sum(exercise_s):.3f} s (median {statistics.median(exercise_s) if exercise_s else 0:.3f}), "
                  f"release {t3 - t2:.3f} s; batch of {calibration.batch}, overhead "
                  f"{calibration.overhead_us:.0f} µs ± {calibration.spread_us:.0f}; {len(batches)} batches said",
                  flush=True)
    runner.close()


if __name__ == "__main__":
    main()
