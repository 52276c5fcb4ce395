"""How often paired timing gets a known difference right, and how often it invents one.

    python bench/paired_accuracy.py --trials 8 --ratios 1.0 1.1 [--load 0|1|2] [--target cpu|cuda] [--out FILE]

Pairs of vector_add kernels whose true speed ratio is set by construction: the base repeats its
pass over the data `r` times for every pass of the candidate (tests/fixtures/vector_add_repeat.py,
single-threaded, so r = 1.1 is 11 passes against 10). Each trial is one paired evaluation
(sandbox/judge/timed.py's run_paired: own runners, alternating rounds, same inputs). For r = 1 a
trial is a false difference when it says "faster" or "slower"; for r > 1 it is right when it says
"faster". `verified` is what the run's verification makes of the trials taken `TRIALS` at a time
(graph/verify.py: a difference only where every fresh judge agrees), the rule that crowns a best.
`--load N` runs N busy processes per core beside the measurement; `--cores` pins the judges and
their runners (sandbox/envinfo.py's parse_cores); `--sizes` replaces the target's benchmark shapes
(on a GPU, vector_add's own reach 1 GB a tensor, and two judges with two runners hold each twice);
`--reanalyse FILE...` reads stored results at each noise floor of `FLOORS`, and by today's
`paired_summary` from their kept round ratios, instead of measuring.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURES = {"cpu": ROOT / "tests" / "fixtures" / "vector_add_repeat.py",
            "cuda": ROOT / "tests" / "fixtures" / "vector_add_repeat_cuda.py"}
PASSES = 10  # the candidate's passes over the data; the base makes PASSES * ratio
# Two judges and two runners: on a GPU each holds vector_add's largest shape (1 GB a tensor) on the host
# as well, beyond the evaluator's single-judge default.
MEMORY_MB = {"cpu": 16384, "cuda": 65536}


def _spin() -> None:
    while True:
        pass


def _kernel(folder: Path, passes: int, target: str) -> Path:
    path = folder / f"passes{passes}.py"
    path.write_text(FIXTURES[target].read_text().replace("REPEAT = 1", f"REPEAT = {passes}"))
    return path


def _problem(folder: Path, target: str, sizes: list[int] | None) -> Path | str:
    """vector_add, or a copy of it whose benchmark shapes for `target` are `sizes` elements."""
    if not sizes:
        return "vector_add"
    import shutil

    import yaml

    copy = folder / "problems" / "vector_add"
    shutil.copytree(ROOT / "problems" / "vector_add", copy)
    shutil.copy(ROOT / "problems" / "utils.py", copy.parent / "utils.py")  # task.yml names ../utils.py
    task = yaml.safe_load((copy / "task.yml").read_text())
    shapes = [{"size": n, "seed": 21 + i} for i, n in enumerate(sizes)]
    task["benchmarks"] = shapes
    task["kernel_scientist"].setdefault("targets", {}).setdefault(target, {})["benchmarks"] = shapes
    (copy / "task.yml").write_text(yaml.safe_dump(task, sort_keys=False))
    return copy


def trial(candidate: Path, base: Path, budget: float, target: str, cores: tuple[int, ...] | None = None,
          problem: Path | str = "vector_add") -> dict[str, object]:
    from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate

    options = EvalOptions(target=target, timing={"budget_s": budget, "warmup_s": 0.02, "min_reps": 12},
                          limits=PhaseLimits(build=300, check=120, time=300), paired_with=str(base), cores=cores,
                          memory_limit_mb=MEMORY_MB[target])
    started = time.perf_counter()
    verdict = evaluate(problem, candidate, options)
    paired = verdict.summary.paired if verdict.summary else None
    return {"status": verdict.status.value, "seconds": round(time.perf_counter() - started, 2),
            "ratio": paired.ratio if paired else None, "ratio_ci": paired.ratio_ci if paired else None,
            "difference": paired.difference if paired else "not measured",
            "rounds": [b.paired.rounds if b.paired else 0 for b in verdict.benchmarks],
            "shapes": [{"shape": b.shape, "candidate_us": b.median_us, "ratio": b.paired.ratio, "ratio_ci": b.paired.ratio_ci,
                        "round_ratios": b.paired.round_ratios} for b in verdict.benchmarks if b.paired],
            "noisy": bool(verdict.host and verdict.host.get("noisy")),
            # Where the pair agreed only after the base was measured again, or in a fresh runner of its own.
            "base_again": [note for b in verdict.benchmarks if b.paired
                           for note in (b.paired.measured_again, b.paired.renewed) if note] or None,
            # Why a trial measured nothing: the verdict's message and rule, or each shape's pairing error.
            "why": None if verdict.status.value == "ok" and all(b.paired and b.paired.ratio for b in verdict.benchmarks)
            else {"message": verdict.message[:300],
                  "rule": verdict.integrity.violation.rule if verdict.integrity.violation else None,
                  "shapes": [b.paired.error[:300] for b in verdict.benchmarks if b.paired and b.paired.error]}}


def verified(runs: list[dict[str, object]]) -> list[str]:
    """What the run's verification (graph/verify.py: `TRIALS` fresh judges, combined) would have said,
    taking the trials in groups of that size."""
    from graph import verify

    def check(run: dict[str, object]) -> verify.Verification:
        return verify.Verification(kernel_id="candidate", base_id="base", kernel_sha256="", base_sha256="",
                                   status=str(run["status"]), ratio=run["ratio"], ratio_ci=run["ratio_ci"],
                                   difference=str(run["difference"]),
                                   shapes=[verify.ShapeRatio.model_validate(s) for s in run.get("shapes") or []])  # type: ignore[attr-defined]

    size = verify.TRIALS
    return [verify.combine([check(r) for r in runs[i:i + size]]).difference
            for i in range(0, len(runs) - size + 1, size)]


FLOORS = (0.01, 0.02, 0.03)  # noise floors the stored intervals are read against (sandbox/summary.py's is the first)


def by_floor(runs: list[dict[str, object]]) -> dict[str, dict[str, int]]:
    """What the trials' intervals say at each noise floor: a floor is the smallest difference called a
    difference, so this shows what raising sandbox/summary.py's NOISE_FLOOR would trade."""
    out: dict[str, dict[str, int]] = {}
    for floor in FLOORS:
        said = {"faster": 0, "slower": 0, "no difference": 0}
        for run in runs:
            ci = run.get("ratio_ci")
            if not ci:
                continue
            lo, hi = float(ci[0]), float(ci[1])  # type: ignore[index]
            said["faster" if lo > 1 + floor else "slower" if hi < 1 / (1 + floor) else "no difference"] += 1
        out[f"{floor:.2f}"] = said
    return out


def by_current_rule(runs: list[dict[str, object]]) -> dict[str, int]:
    """What today's `paired_summary` makes of the trials' kept round ratios, shape by shape (a busy
    trial's shapes as busy, with one evaluation's round count), combined as the verdict combines them."""
    from sandbox.judge.timed import MIN_PAIRED_ROUNDS
    from sandbox.summary import difference, geomean_interval, paired_summary

    said: dict[str, int] = {}
    for run in runs:
        shapes = [s for s in run.get("shapes") or [] if isinstance(s, dict)]  # type: ignore[attr-defined]
        if not shapes or not all(s.get("round_ratios") for s in shapes):
            said["not measured"] = said.get("not measured", 0) + 1
            continue
        per = [paired_summary(s["round_ratios"], busy=bool(run.get("noisy")), busy_rounds=MIN_PAIRED_ROUNDS)
               for s in shapes]
        ci = geomean_interval([p["ratio"] for p in per], [(p["ratio_ci"][0], p["ratio_ci"][1]) for p in per])
        verdict = difference(*ci) if ci else "not measured"
        said[verdict] = said.get(verdict, 0) + 1
    return said


def reanalyse(paths: list[Path]) -> None:
    """Each stored result's trials read at every floor in `FLOORS`, and by today's rules from their
    kept round ratios, one line per file and ratio."""
    for path in paths:
        for ratio, summary in json.loads(path.read_text())["ratios"].items():
            print(json.dumps({"file": path.name, "ratio": ratio, "trials": len(summary["runs"]),
                              "by_floor": by_floor(summary["runs"]), "current_rule": by_current_rule(summary["runs"])}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--ratios", type=float, nargs="+", default=[1.0, 1.1])
    parser.add_argument("--load", type=int, default=0, help="busy processes per core beside the measurement")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per shape (the run's default)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--target", choices=sorted(FIXTURES), default="cpu")
    parser.add_argument("--cores", default=None, help="pin the judges and runners to these cores, e.g. 1")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="benchmark shapes, in elements")
    parser.add_argument("--reanalyse", type=Path, nargs="+", default=None,
                        help="read stored results at each noise floor instead of measuring")
    args = parser.parse_args()
    if args.reanalyse:
        reanalyse(args.reanalyse)
        return
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load * (os.cpu_count() or 1))]
    for p in spinners:
        p.start()
    from graph import verify  # noqa: F401 - loaded now, with the rest of the code it measures
    from sandbox.envinfo import parse_cores

    results: dict[str, object] = {"load_per_core": args.load, "trials": args.trials, "cores": args.cores,
                                  "target": args.target, "sizes": args.sizes, "ratios": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="ks-paired-") as tmp:
            candidate = _kernel(Path(tmp), PASSES, args.target)
            problem = _problem(Path(tmp), args.target, args.sizes)
            for ratio in args.ratios:
                base = _kernel(Path(tmp), round(PASSES * ratio), args.target)
                cores = parse_cores(args.cores) if args.cores else None
                runs = []
                for _ in range(args.trials):  # each trial as it ends: a run cut off still says what it measured
                    runs.append(trial(candidate, base, args.budget, args.target, cores, problem))
                    print(json.dumps({"trial": ratio, **{k: v for k, v in runs[-1].items() if k != "shapes"}}), flush=True)
                said = [r["difference"] for r in runs]
                pipeline = verified(runs)
                summary = {"runs": runs, "faster": said.count("faster"), "slower": said.count("slower"),
                           "no_difference": said.count("no measurable difference"),
                           "not_measured": said.count("not measured"),
                           "estimate_above_1": sum(1 for r in runs if r["ratio"] and float(r["ratio"]) > 1),  # type: ignore[arg-type]
                           "verified": {d: pipeline.count(d) for d in sorted(set(pipeline))},
                           "by_floor": by_floor(runs)}
                results["ratios"][str(ratio)] = summary  # type: ignore[index]
                print(json.dumps({"ratio": ratio, **{k: v for k, v in summary.items() if k != "runs"},
                                  "seconds_per_trial": [r["seconds"] for r in runs],
                                  "rounds": [r["rounds"] for r in runs]}), flush=True)
    finally:
        for p in spinners:
            p.terminate()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
