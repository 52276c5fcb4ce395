"""How often paired timing gets a known difference right, and how often it invents one.

    python bench/paired_accuracy.py --trials 8 --ratios 1.0 1.1 [--load 0|1|2] [--out FILE]

Pairs of vector_add kernels whose true speed ratio is set by construction: the base repeats its
pass over the data `r` times for every pass of the candidate (tests/fixtures/vector_add_repeat.py,
single-threaded, so r = 1.1 is 11 passes against 10). Each trial is one paired evaluation
(sandbox/judge/timed.py's run_paired: own runners, alternating rounds, same inputs). For r = 1 a
trial is a false difference when it says "faster" or "slower"; for r > 1 it is right when it says
"faster". `--load N` runs N busy processes per core beside the measurement.
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
FIXTURE = ROOT / "tests" / "fixtures" / "vector_add_repeat.py"
PASSES = 10  # the candidate's passes over the data; the base makes PASSES * ratio


def _spin() -> None:
    while True:
        pass


def _kernel(folder: Path, passes: int) -> Path:
    path = folder / f"passes{passes}.py"
    path.write_text(FIXTURE.read_text().replace("REPEAT = 1", f"REPEAT = {passes}"))
    return path


def trial(candidate: Path, base: Path, budget: float) -> dict[str, object]:
    from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate

    options = EvalOptions(target="cpu", timing={"budget_s": budget, "warmup_s": 0.02, "min_reps": 12},
                          limits=PhaseLimits(build=300, check=120, time=300), paired_with=str(base))
    started = time.perf_counter()
    verdict = evaluate("vector_add", candidate, options)
    paired = verdict.summary.paired if verdict.summary else None
    return {"status": verdict.status.value, "seconds": round(time.perf_counter() - started, 2),
            "ratio": paired.ratio if paired else None, "ratio_ci": paired.ratio_ci if paired else None,
            "difference": paired.difference if paired else "not measured",
            "noisy": bool(verdict.host and verdict.host.get("noisy"))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--ratios", type=float, nargs="+", default=[1.0, 1.1])
    parser.add_argument("--load", type=int, default=0, help="busy processes per core beside the measurement")
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load * (os.cpu_count() or 1))]
    for p in spinners:
        p.start()
    results: dict[str, object] = {"load_per_core": args.load, "trials": args.trials, "ratios": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="ks-paired-") as tmp:
            candidate = _kernel(Path(tmp), PASSES)
            for ratio in args.ratios:
                base = _kernel(Path(tmp), round(PASSES * ratio))
                runs = [trial(candidate, base, args.budget) for _ in range(args.trials)]
                said = [r["difference"] for r in runs]
                summary = {"runs": runs, "faster": said.count("faster"), "slower": said.count("slower"),
                           "no_difference": said.count("no measurable difference"),
                           "not_measured": said.count("not measured")}
                results["ratios"][str(ratio)] = summary  # type: ignore[index]
                print(json.dumps({"ratio": ratio, **{k: v for k, v in summary.items() if k != "runs"},
                                  "seconds_per_trial": [r["seconds"] for r in runs]}), flush=True)
    finally:
        for p in spinners:
            p.terminate()
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
