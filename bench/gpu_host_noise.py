"""Is a GPU runner's slow batch the host's or its own process's? Two processes run the runner's no-op batch in turns.

    python bench/gpu_host_noise.py [SECONDS] [CORES]

Each process does what sandbox/runner/main.py does per call of a timed batch (flush and wait, events around the
no-op, the digest) on rmsnorm's first benchmark shape, 16 calls a batch, taking turns through a file lock as a
judge and its runner would; CORES (comma-separated) pins both. Prints per process the batches' wall time and its
parts (flush and wait, the call on the host's clock, its events, the digest), the parts of its slow batches (over
1.3 times the median), and how well the two processes' walls agree batch by batch. A correlation near zero says
the slowness is each process's own, so a calibration taken in another process cannot stand in for it.
"""
from __future__ import annotations

import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, ".")


def _batch(flush, data, noop, digest, n: int = 16) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    import torch

    parts = [0.0] * 4
    kept = []
    began = time.perf_counter_ns()
    for _ in range(n):
        t0 = time.perf_counter_ns()
        flush.zero_()
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        out = noop(data, 0, None)
        end.record()
        torch.cuda.synchronize()
        t2 = time.perf_counter_ns()
        digest([out])
        t3 = time.perf_counter_ns()
        kept.append(out)
        parts[0] += (t1 - t0) / 1e3
        parts[1] += (t2 - t1) / 1e3
        parts[2] += begin.elapsed_time(end) * 1e3
        parts[3] += (t3 - t2) / 1e3
    return (time.perf_counter_ns() - began) / 1e3, parts


def one_side(out: str, lock: str, seconds: float) -> None:
    """One process: batches in turns with the other until `seconds` are over; its rows to `out`."""
    import torch

    from sandbox.problem import load_problem
    from sandbox.runner.main import FLUSH_BYTES, _noop
    from sandbox.shared.blend import digest

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    problem = load_problem("rmsnorm", "cuda")
    problem.bind()
    data = problem.generate_input(dict(problem.benchmarks[0]), "cuda")
    for _ in range(3):
        _batch(flush, data, _noop, digest)
    rows = []
    with open(lock, "a+") as turn:
        end = time.time() + seconds
        while time.time() < end:
            fcntl.flock(turn, fcntl.LOCK_EX)
            started = time.time()
            wall, parts = _batch(flush, data, _noop, digest)
            fcntl.flock(turn, fcntl.LOCK_UN)
            rows.append([started, wall, *parts])
            time.sleep(0.002)
    with open(out, "w") as f:
        json.dump(rows, f)


def _summary(name: str, rows: list[list[float]]) -> None:
    walls = sorted(r[1] for r in rows)
    median = statistics.median(walls)
    parts = [round(statistics.median(r[i] for r in rows)) for i in range(2, 6)]
    print(f"{name}: {len(rows)} batches, wall median {median:.0f} µs (p10 {walls[len(walls) // 10]:.0f}, "
          f"p90 {walls[9 * len(walls) // 10]:.0f}); parts (flush and wait, call, events, digest) {parts}")
    slow = [r for r in rows if r[1] > 1.3 * median]
    if slow:
        print(f"   {len(slow)} slow batches, parts {[round(statistics.median(r[i] for r in slow)) for i in range(2, 6)]}")


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 25.0
    cores = sys.argv[2] if len(sys.argv) > 2 else ""
    with tempfile.TemporaryDirectory() as folder:
        lock, outs = os.path.join(folder, "turn"), [os.path.join(folder, f"{side}.json") for side in "ab"]
        prefix = ["taskset", "-c", cores] if cores else []
        sides = [subprocess.Popen([*prefix, sys.executable, __file__, "--side", out, lock, str(seconds)]) for out in outs]
        for side in sides:
            side.wait()
        a, b = (json.load(open(out)) for out in outs)
    _summary("A", a)
    _summary("B", b)
    pairs = []
    for row in a:
        near = min(b, key=lambda other: abs(other[0] - row[0]))
        if abs(near[0] - row[0]) < 0.05:
            pairs.append((row[1], near[1]))
    print(f"{len(pairs)} batches paired in time; correlation of their walls "
          f"{statistics.correlation([x for x, _ in pairs], [y for _, y in pairs]):.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--side":
        one_side(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        main()
