"""How fast each core of this host runs the same host work, pass after pass: is a GPU runner's slow spell its core's?

    python bench/core_pace.py [PASSES]

Pins this process to each core it may use in turn and times a fixed interpreter loop and, where a GPU is present,
a torch launch (the fastest of three tries each), then sleeps half a second and starts the next pass. Prints one
row per core: the launch's cost and the loop's time, pass by pass. On the lent H200 (docs/BENCHMARKS.md,
seventeenth session) the same loop took 1.3 to 2.9 ms on one core from one pass to the next.
"""
from __future__ import annotations

import os
import sys
import time


def _loop_us() -> float:
    start = time.perf_counter_ns()
    total = 0
    for k in range(30000):
        total += k * k
    return (time.perf_counter_ns() - start) / 1e3


def _launch_us(x: object, n: int = 400) -> float:
    import torch

    start = time.perf_counter_ns()
    for _ in range(n):
        x.add_(1)  # type: ignore[attr-defined]
    took = (time.perf_counter_ns() - start) / 1e3 / n
    torch.cuda.synchronize()
    return took


def main(passes: int) -> None:
    import torch

    x = torch.zeros(16, device="cuda") if torch.cuda.is_available() else None
    cores = sorted(os.sched_getaffinity(0))
    loops: dict[int, list[float]] = {c: [] for c in cores}
    launches: dict[int, list[float]] = {c: [] for c in cores}
    for _ in range(passes):
        for core in cores:
            os.sched_setaffinity(0, {core})
            if x is not None:
                _launch_us(x, 50)
                launches[core].append(min(_launch_us(x) for _ in range(3)))
            loops[core].append(min(_loop_us() for _ in range(3)))
        time.sleep(0.5)
    os.sched_setaffinity(0, set(cores))
    for core in cores:
        launch = " ".join(f"{v:5.1f}" for v in launches[core]) or "-"
        print(f"core {core:3d}: launch µs {launch}   loop µs {' '.join(f'{v:6.0f}' for v in loops[core])}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 6)
