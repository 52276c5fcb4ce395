"""What idle threads of a kernel cost its figure: the vector_add CPU seed with N threads blocked at import.

    python bench/idle_threads.py --threads 0 64 200 1000 [--root <checkout>] [--compare <checkout>] [--rounds 2]

The judge stops the runner's sandbox after each answer and lets it go on at the next request. Threads that
never run should cost the kernel nothing; red-team round 23 measured 64 of them at +53% on the 1M shape and
1,000 refused `timing-contradicted`. Each kernel is the seed's source with `N` threads started at import,
all waiting on one event; each is evaluated in full (budget 0.25 s a shape) in a fresh judge. `--compare`
runs the same in another checkout, alternated round by round, so two designs meet the same host.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_IDLE = "\nimport threading as _threading\n_idle = _threading.Event()\nfor _ in range({n}):\n" \
        "    _threading.Thread(target=_idle.wait, daemon=True).start()\n"
_ONE = """
import json, sys
from sandbox.evaluator import EvalOptions, evaluate
v = evaluate("vector_add", sys.argv[1], EvalOptions(target="cpu", timing={"budget_s": 0.25}))
rule = v.integrity.violation.rule if v.integrity.violation else None
print(json.dumps({"status": v.status.value, "rule": rule, "medians": {b.shape: b.median_us for b in v.benchmarks}}))
"""


def kernel(folder: Path, threads: int) -> Path:
    """The seed with `threads` idle threads started at import."""
    seed = (ROOT / "problems" / "vector_add" / "seeds" / "cpu.py").read_text()
    path = folder / f"idle_{threads}.py"
    path.write_text(seed + (_IDLE.format(n=threads) if threads else ""))
    return path


def evaluate_in(root: Path, path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _ONE, str(path)], capture_output=True, text=True, cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"status": "harness-error", "error": done.stderr[-500:]}


def _medians(runs: list[dict[str, object]]) -> dict[str, float]:
    """Per shape, the median over runs of the verdicts' medians (a refused run has none for some shapes)."""
    by_shape: dict[str, list[float]] = {}
    for run in runs:
        medians = run.get("medians")
        for shape, value in (medians.items() if isinstance(medians, dict) else []):
            by_shape.setdefault(shape, []).append(float(value))
    return {shape: round(statistics.median(values), 1) for shape, values in sorted(by_shape.items())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, nargs="+", default=[0, 64, 200, 1000])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    roots = [args.root, *([args.compare] if args.compare else [])]
    results: dict[str, dict[int, list[dict[str, object]]]] = {str(r): {n: [] for n in args.threads} for r in roots}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.rounds):
            for n in args.threads:
                for root in roots:
                    found = evaluate_in(root, kernel(Path(folder), n))
                    results[str(root)][n].append(found)
                    print(f"{root} threads={n}: {found}", flush=True)
    for root, by_n in results.items():
        print(f"\n{root}")
        for n, runs in by_n.items():
            print(f"  {n:5d} threads: {[r['status'] for r in runs]} medians {_medians(runs)}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
