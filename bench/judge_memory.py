"""Peak memory of one evaluation (the judge, its runner and what they share) against the problem's data.

    python bench/judge_memory.py PROBLEM SUBMISSION [--target cpu] [--mode full]

Samples, five times a second, the resident memory of every process whose command line names the
judge or the runner, and reports the peak next to the bytes of one input set and its output. The
arena is mapped by both processes, so its pages count twice in the sum: the figure is an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.evaluator import EvalOptions, evaluate  # noqa: E402

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _evaluation_rss() -> int:
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if b"sandbox.judge" not in cmdline and b"sandbox.runner" not in cmdline:
                continue
            total += int(Path(f"/proc/{entry}/statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


def _data_bytes(problem: str, target: str) -> tuple[int, int]:
    """Bytes of one input set and of its output, for the largest benchmark shape."""
    import torch

    from sandbox.problem import load_problem
    from sandbox.shared.arena import tensors

    spec = load_problem(problem, target)
    spec.bind()
    params = max(spec.benchmarks, key=lambda p: sum(v for v in p.values() if isinstance(v, int)))
    data = spec.generate_input(params, "cpu")
    inputs = sum(t.numel() * t.element_size() for _, t in tensors(data))
    with torch.no_grad():
        output = spec.reference(data)
    return inputs, sum(t.numel() * t.element_size() for _, t in tensors(output))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("submission")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--mode", default="full")
    args = parser.parse_args()
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _evaluation_rss())
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    verdict = evaluate(args.problem, args.submission,
                       EvalOptions(target=args.target, mode=args.mode, timing={"budget_s": 0.3}))
    done.set()
    thread.join()
    inputs, output = _data_bytes(args.problem, args.target)
    print(json.dumps({"status": verdict.status.value, "message": verdict.message[:200], "peak_mb": round(peak[0] / 2**20),
                      "input_mb": round(inputs / 2**20), "output_mb": round(output / 2**20),
                      "multiple_of_data": round(peak[0] / max(1, inputs + output), 2)}))


if __name__ == "__main__":
    main()
