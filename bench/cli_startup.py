"""Start-up time of the command line: `--help`, `problems`, `status RUN` and `kb stats`, each the
median of N fresh processes, beside `python -c pass` (the floor) and, with --old REV, beside the same
commands of an older revision checked out into a temporary git worktree. The two are run in
alternation, so a busy machine slows both alike and the ratio stays meaningful.

    python bench/cli_startup.py --old 94d0eea --repeats 5
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median, save  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "import sys; from graph.cli import app; sys.argv[0] = 'kernel-scientist'; app()"


def make_run(runs_dir: Path) -> str:
    """A run directory to ask `status` about (created, never executed: status reads only the archive)."""
    from graph.config import RunConfig
    from graph.runs import create_run

    return create_run(RunConfig(problem="vector_add"), runs_dir).run_id


def commands(run_id: str) -> dict[str, list[str]]:
    return {"--help": ["--help"], "problems": ["problems"], "status RUN": ["status", run_id], "kb stats": ["kb", "stats"]}


def timed(tree: Path, args: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn to exit of one command run from `tree`'s sources."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=tree, env=dict(env, PYTHONPATH=str(tree)),
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{args} failed in {tree}: {done.stdout[-500:]}{done.stderr[-500:]}")
    return seconds


def python_floor(repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", help="A git revision to compare with (checked out into a temporary worktree).")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--name", default="cli_startup")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ks-startup-") as tmp:
        env = dict(os.environ, KS_RUNS_DIR=str(Path(tmp) / "runs"), KS_KB_DIR=str(Path(tmp) / "kb"))
        os.environ.update(KS_RUNS_DIR=env["KS_RUNS_DIR"])
        run_id = make_run(Path(env["KS_RUNS_DIR"]))
        trees = {"new": ROOT}
        if args.old:
            old = Path(tmp) / "old"
            subprocess.run(["git", "worktree", "add", "--detach", str(old), args.old], cwd=ROOT, check=True,
                           capture_output=True)  # fmt: skip
            trees["old"] = old
        try:
            for tree in trees.values():  # warm-up, untimed: the primer goes into the new store once
                timed(tree, ["kb", "stats"], env)
            samples: dict[str, dict[str, list[float]]] = {t: {c: [] for c in commands(run_id)} for t in trees}
            for _ in range(args.repeats):
                for name, argv in commands(run_id).items():
                    for label, tree in trees.items():  # alternated: both see the same machine
                        samples[label][name].append(timed(tree, argv, env))
            floor = python_floor(args.repeats)
        finally:
            if "old" in trees:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees["old"])], cwd=ROOT, check=False)
    medians = {label: {name: median(v) for name, v in per.items()} for label, per in samples.items()}
    results = {
        label: {name: {"median_s": round(medians[label][name], 3), "samples_s": [round(x, 3) for x in v],
                       "x_python": round(medians[label][name] / floor, 1)} for name, v in per.items()}
        for label, per in samples.items()
    }  # fmt: skip
    print(f"python -c pass: {floor:.3f} s (median of {args.repeats})")
    print(f"{'command':12} " + " ".join(f"{label:>22}" for label in results) + ("   new/old" if "old" in results else ""))
    for name in commands(run_id):
        cells = [f"{medians[label][name]:7.2f} s ({medians[label][name] / floor:5.1f}x py)" for label in medians]
        ratio = f"   {medians['new'][name] / medians['old'][name]:.2f}" if "old" in medians else ""
        print(f"{name:12} " + " ".join(f"{c:>22}" for c in cells) + ratio)
    path = save(args.name, {"old": args.old, "repeats": args.repeats, "python_floor_s": round(floor, 3), "results": results})
    print(f"written to {path}")


if __name__ == "__main__":
    main()
