"""The README's main job on a busy host, and whether the wins it crowned survive a re-timing.

    python bench/main_job_under_load.py [--load 1] [--generations 3] [--parallel 2] [--budget 0.5] [--out FILE]

Runs the main job (`kernel-scientist run matmul_bf16 --target cpu`, the Tuner alone, as
scripts/demo.sh does) with `--load` busy processes per core beside it. A run crowns a new best only
when two fresh judges time it beside the old one and both say faster (graph/verify.py). Afterwards,
under the same load, every win the run recorded is timed again beside the kernel it beat, in two
more fresh judges (`kernel-scientist verify RUN KERNEL --against BASE`, the command the archive
keeps with each win). A win is *contradicted* when its re-timing says slower, *not reproduced* when
it says no measurable difference.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CLI = str(Path(sys.executable).with_name("kernel-scientist"))


def _spin() -> None:
    while True:
        pass


def _run(runs: Path, args: argparse.Namespace) -> tuple[str, float]:
    started = time.perf_counter()
    subprocess.run([CLI, "run", "matmul_bf16", "--target", "cpu", "--generations", str(args.generations),
                    "--parallel", str(args.parallel), "--budget", str(args.budget), "--plain", "--runs-dir", str(runs)],
                   check=True, stdout=subprocess.DEVNULL)
    (run,) = [p.name for p in runs.iterdir() if p.is_dir()]
    return run, time.perf_counter() - started


def _wins(runs: Path, run: str) -> tuple[list[Any], list[str], dict[str, Any]]:
    """The wins the run recorded, every side-by-side measurement it made (described), and its kernels."""
    from graph import verify
    from graph.report_cli import opened_run

    with opened_run(run, runs) as (_, archive):
        seen, wins = set(), []
        checks = verify.verifications(archive)
        for check in checks:
            if check.confirmed and (check.kernel_id, check.base_id) not in seen:
                seen.add((check.kernel_id, check.base_id))
                wins.append(check)
        best, seed = archive.run_best(), archive.seed()
        kernels = {"kernels": len(archive.kernels()), "crowned": best.id if best else None,
                   "leaderboard_top": (archive.best().id if archive.best() else None),
                   "seed_us": seed.geomean_us if seed else None, "crowned_us": best.geomean_us if best else None}
        return wins, [c.describe() for c in checks], kernels


def _retime(runs: Path, run: str, kernel: str, base: str) -> Any:
    from graph import verify
    from graph.report_cli import opened_run

    subprocess.run([CLI, "verify", run, kernel, "--against", base, "--runs-dir", str(runs)], check=True,
                   stdout=subprocess.DEVNULL)
    with opened_run(run, runs) as (_, archive):
        return verify.verifications(archive)[-1]


def _row(check: Any) -> dict[str, Any]:
    return {"kernel": check.kernel_id, "base": check.base_id, "ratio": check.ratio, "ratio_ci": check.ratio_ci,
            "difference": check.difference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=1, help="busy processes per core beside the job")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load * (os.cpu_count() or 1))]
    for spinner in spinners:
        spinner.start()
    try:
        with tempfile.TemporaryDirectory(prefix="ks-main-job-") as folder:
            runs = Path(folder)
            run, seconds = _run(runs, args)
            wins, measured, kernels = _wins(runs, run)
            for line in measured:
                print(f"measured in the run: {line}", flush=True)
            retimed = []
            for win in wins:
                again = _retime(runs, run, win.kernel_id, win.base_id)
                retimed.append({"claimed": _row(win), "again": _row(again)})
                print(f"{win.describe()}  |  again: {again.describe()}", flush=True)
    finally:
        for spinner in spinners:
            spinner.terminate()
    result = {"load_per_core": args.load, "cores": os.cpu_count(), "run_seconds": round(seconds, 1), **kernels,
              "measured_in_run": measured, "wins": len(wins),
              "contradicted": sum(r["again"]["difference"] == "slower" for r in retimed),
              "not_reproduced": sum(r["again"]["difference"] == "no measurable difference" for r in retimed),
              "retimed": retimed}
    print(json.dumps({k: v for k, v in result.items() if k != "retimed"}))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
