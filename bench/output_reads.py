"""What the judge's read of a CPU output costs, by layout: whole (its span, a piece at a time) or run by run.

    python bench/output_reads.py [--repeats 5]

A child process holds 256 MB of float32 and waits; the judge's reader (`sandbox/judge/remote.py`) copies
views of it out, as it copies a CPU kernel's outputs after each answer. Each layout is read both ways
(the span through `_gather`, the runs through `Runs`) and the way the reader picks is named; medians of
`--repeats` reads, in milliseconds, with what each read charged the output's budget.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.judge import remote  # noqa: E402
from sandbox.judge.remote import ReadBudget, RunnerMemory, Runs, new_token  # noqa: E402
from sandbox.shared.arena import parse_spec  # noqa: E402

_HOLDER = """
import sys, torch
token = torch.frombuffer(bytearray(bytes.fromhex(sys.argv[1])), dtype=torch.uint8)
held = torch.arange(1 << 26, dtype=torch.float32)
print(token.data_ptr(), held.data_ptr(), flush=True)
sys.stdin.read()
"""
# name, shape, stride (elements): all within the 64M floats the holder keeps
LAYOUTS = [
    ("contiguous 4M", [1 << 22], [1]),
    ("rows of 1024 at a pitch of 65,536", [1024, 1024], [65536, 1]),
    ("rows of 4096 at a pitch of 16,384", [4096, 4096], [16384, 1]),
    ("a slot of a ring of 24, 2M", [1 << 21], [24]),
    ("a column, 1M, stride 64", [1 << 20], [64]),
    ("transposed 2048x2048", [2048, 2048], [1, 2048]),
]


def read_ms(memory: RunnerMemory, spec: dict[str, object], way: str, repeats: int) -> tuple[float, int]:
    """Median milliseconds of reading `spec` the given way, and what one read charged its budget."""
    layout = parse_spec(spec, "address")
    times, charged = [], 0
    for _ in range(repeats):
        budget = ReadBudget(layout.nbytes)
        budget.read_left = 1 << 62  # measured, not refused
        left = budget.read_left
        out = torch.empty(layout.shape, dtype=layout.dtype)
        started = time.perf_counter()
        if way == "runs":
            memory._read_runs(Runs.of(layout), out, budget)
        else:
            memory._gather(layout.start, layout.shape, layout.stride, out, budget)
        times.append((time.perf_counter() - started) * 1e3)
        charged = left - budget.read_left
    return statistics.median(times), charged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    token = new_token()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, token.hex()], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        token_at, held_at = (int(x) for x in holder.stdout.readline().split())
        memory, why = RunnerMemory.probe(holder.pid, token_at, token)
        if memory is None:
            raise SystemExit(f"the holder's memory cannot be read: {why}")
        print("| layout | holds MB | spans MB | whole: ms, MB charged | run by run: ms, MB charged "
              "| the reader's way |")
        print("|---|---|---|---|---|---|")
        for name, shape, stride in LAYOUTS:
            spec = {"dtype": "float32", "shape": shape, "stride": stride, "address": held_at}
            layout = parse_spec(spec, "address")
            runs = Runs.of(layout)
            whole = read_ms(memory, spec, "whole", args.repeats)
            by_runs = read_ms(memory, spec, "runs", args.repeats)
            way = "runs" if runs.cost() < max(layout.span, remote.LEAF_CHARGE) else "whole"
            print(f"| {name} | {layout.nbytes / 1e6:.1f} | {layout.span / 1e6:.1f} "
                  f"| {whole[0]:.1f}, {whole[1] / 1e6:.1f} | {by_runs[0]:.1f}, {by_runs[1] / 1e6:.1f} | {way} |")
        memory.close()
    finally:
        holder.kill()
        holder.wait()


if __name__ == "__main__":
    main()
