"""Evaluations per minute on 1 and 2 GPUs (local pool), and Ray's scheduling cost per evaluation.

The batch is every assignment of a seed's tunables (distinct, correct kernels), so the same
candidates go through each configuration. Builds are made once before the timed passes (the
build cache is shared), so the figures compare evaluation (check and time) throughput.

    python bench/eval_throughput.py --problem matmul_bf16 --target cuda --gpus 0 0,1     # GPU scaling
    python bench/eval_throughput.py --problem softmax --target cpu --backends pool ray  # Ray vs pool
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import save  # noqa: E402
from sandbox.evaluator import EvalOptions  # noqa: E402
from sandbox.pool import EvaluationPool  # noqa: E402
from sandbox.problem import load_problem  # noqa: E402
from sandbox.tunables import parse_tunables, render  # noqa: E402


def batch(
    problem: str, target: str, variant: str | None, limit: int, copies: int, folder: Path
) -> tuple[Path, list[Path]]:
    spec = load_problem(problem, target)
    source = spec.seed_for(target, variant).read_text()
    tunables = parse_tunables(source)
    grid = itertools.product(*[t.values for t in tunables])
    files = []
    assignments = list(itertools.islice(grid, limit))
    for copy in range(copies):
        for i, values in enumerate(assignments):
            path = folder / f"candidate_{i}_{copy}.py"
            text = render(source, dict(zip([t.name for t in tunables], values, strict=True)))
            path.write_text(text + (f"\n# copy {copy}\n" if copy else ""))  # a distinct file, the same kernel
            files.append(path)
    return spec.path, files


def ray_slots(target: str) -> int:
    """How many evaluations the Ray instance runs at once (its GPUs, or its CPU timing slots)."""
    import ray

    from sandbox.ray_pool import CPU_SLOT

    return int(ray.cluster_resources().get("GPU" if target != "cpu" else CPU_SLOT, 1))


def utilisation(timeline: list[dict], devices: list[int], wall: float) -> dict:
    """How busy each device slot was: its evaluations' seconds over the pass's wall time."""
    busy = {d: 0.0 for d in devices}
    for entry in timeline:
        if entry["stage"] == "evaluate" and entry["device"] in busy:
            busy[entry["device"]] += entry["end"] - entry["start"]
    return {
        "busy_s": {str(d): round(b, 2) for d, b in busy.items()},
        "utilisation": round(sum(busy.values()) / (len(devices) * wall), 3),
    }


STANDBY_LINE = re.compile(r"standby: host warm-up ([\d.]+) s; (?:device step done in ([\d.]+) s)?")


def run_pass(pool, problem: Path, files: list[Path], dump: Path | None = None) -> tuple[float, list[str], list[str], dict]:
    start = time.perf_counter()
    verdicts = pool.map(problem, files)
    wall = time.perf_counter() - start
    # What each worker's standby time had paid before its request (see sandbox/worker.py),
    # and where an evaluation's seconds went (its phases; "build" includes waiting for the GPU).
    standby = {"device_step_done": 0, "device_step_left_to_request": 0, "no_device": 0, "no_line": 0}
    host_s, context_s = [], []
    for verdict in verdicts:
        tail = verdict.log_tail or ""
        if "device step done" in tail:
            standby["device_step_done"] += 1
        elif "device step is the request's" in tail:
            standby["device_step_left_to_request"] += 1
        elif "standby: host warm-up" in tail:
            standby["no_device"] += 1
        else:
            standby["no_line"] += 1
        if match := STANDBY_LINE.search(tail):
            host_s.append(float(match.group(1)))
            if match.group(2):
                context_s.append(float(match.group(2)))
    phases = {
        name: round(statistics.median(v.phases.get(name, 0.0) for v in verdicts), 3) for name in ("build", "check", "time")
    }
    details = {
        "standby": standby,
        "standby_host_warm_up_median_s": round(statistics.median(host_s), 3) if host_s else None,
        "standby_device_step_median_s": round(statistics.median(context_s), 3) if context_s else None,
        "phase_medians_s": phases,
    }
    details["evaluation_s_sum"] = round(sum(v.wall_seconds or 0.0 for v in verdicts), 3)
    if dump is not None:  # every verdict whole, for where its seconds went (phases, per-shape judge figures)
        with dump.open("a") as out:
            out.writelines(v.model_dump_json() + "\n" for v in verdicts)
    return wall, [v.status.value for v in verdicts], [v.message for v in verdicts if not v.passed], details


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="matmul_bf16")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--variant", default=None)
    parser.add_argument("--candidates", type=int, default=12)
    parser.add_argument("--copies", type=int, default=1, help="each assignment this many times (a longer batch)")
    parser.add_argument("--budget", type=float, default=0.3, help="timing seconds per shape")
    parser.add_argument("--gpus", nargs="*", default=["0"], help="device sets to compare, e.g. 0 0,1")
    parser.add_argument("--backends", nargs="*", default=["pool"], help="pool and/or ray (ray: one device set)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--warm", type=int, default=2, help="standby workers per device (local pool)")
    parser.add_argument("--verdicts", type=Path, default=None, help="append every verdict, whole, to this JSONL file")
    args = parser.parse_args()

    options = EvalOptions(target=args.target, timing={"budget_s": args.budget})
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        problem, files = batch(args.problem, args.target, args.variant, args.candidates, args.copies, Path(tmp))
        with EvaluationPool(EvalOptions(target=args.target, mode="build"), devices=[0]) as builder:
            built = builder.map(problem, files)  # fill the build cache once for every pass
        print(f"{len(files)} candidates; builds: {[v.status.value for v in built]}")
        for repeat in range(args.repeats):
            for backend in args.backends:
                for gpus in args.gpus if backend == "pool" else args.gpus[:1]:
                    devices = [int(g) for g in gpus.split(",")]
                    if backend == "pool":
                        pool = EvaluationPool(options, devices=devices, warm_workers=args.warm)
                        pool.prewarm(problem)
                        slots = len(devices)
                    else:
                        from sandbox.ray_pool import RayEvaluationPool

                        pool = RayEvaluationPool(options, address="local")
                        pool.prewarm(problem)
                        slots = ray_slots(args.target)
                    try:
                        wall, statuses, failures, details = run_pass(pool, problem, files, args.verdicts)
                    finally:
                        pool.close()
                    row = {
                        "repeat": repeat,
                        "backend": backend,
                        "devices": devices,
                        "warm_workers": args.warm,
                        "wall_s": wall,
                        "per_minute": 60 * len(files) / wall,
                        "seconds_per_evaluation": wall / len(files),
                        "statuses": statuses,
                        "failures": failures,
                        **details,
                    }
                    if backend == "pool":
                        row.update(utilisation(pool.timeline, devices, wall))
                    # Slot time spent on anything but the evaluations themselves (dispatch, task
                    # transfer, worker start, gaps), per evaluation: the evaluations' own noise cancels.
                    row["overhead_per_evaluation_s"] = round(
                        (wall * slots - details["evaluation_s_sum"]) / len(files), 3
                    )
                    results.append(row)
                    # Saved after every pass: a run cut short (a device call's limit) keeps what it measured.
                    save(f"eval_throughput.{args.target}", {"command": " ".join(sys.argv), "results": results})
                    print(
                        f"{backend} {gpus}: {wall:.1f} s, {row['per_minute']:.1f} evaluations/min, "
                        f"ok {statuses.count('ok')}/{len(statuses)} busy {row.get('utilisation')} "
                        f"overhead/eval {row['overhead_per_evaluation_s']} s {[m[:300] for m in failures]}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
