"""What a paired shape's figures would have been under a noisier calibration, before and after the CPU floor.

    python bench/floor_replay.py bench/results/paired_batches.2026-11-28-s22/*.json [--spread 1600]

Each file holds one paired shape's batches as a patched judge recorded them (sandbox/judge/timed.py's Track:
per batch the runner's sum, the round trip beyond the calibrated overhead, the runner's CPU time beyond the
no-op's, and the calibration's overhead and spreads), for a candidate and a base that reports a fifth of its
time (tests/adversarial/rt_renewal_unchecked_runner.py). The replay gives each kernel's median figure per call
with the round trips' spread as recorded and as `--spread` (CI's noisy host: 1.6 ms a batch), under the floor
before this change (the round trip less 1.5 spreads, or the CPU time shared by every core) and under
sandbox/judge/bound.py's `batch_figure` as it stands.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.judge.bound import Calibration, batch_figure, cores  # noqa: E402


def before(reported: float, judged: float, cal: Calibration, cpu: float) -> float:
    """The floor as it stood at c380c68."""
    return max(reported, judged - 1.5 * cal.spread_us, cpu / cores() - 1.5 * cal.cpu_spread_us)


def medians(track: dict, spread: float | None) -> tuple[float, float]:
    overhead, own_spread, cpu_overhead, cpu_spread = track["cal"]
    cal = Calibration(batch=track["sizes"][0], overhead_us=overhead, spread_us=own_spread if spread is None else spread,
                      cpu_overhead_us=cpu_overhead, cpu_spread_us=cpu_spread)
    rows = list(zip(track["reported"], track["beyond"], track["cpu"], track["sizes"], strict=True))
    old = statistics.median(before(r, max(0.0, b), cal, c) / n for r, b, c, n in rows)
    new = statistics.median(batch_figure(r, max(0.0, b), cal, "cpu", c) / n for r, b, c, n in rows)
    return old, new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--spread", type=float, default=1600.0, help="the round trips' spread to replay, µs a batch")
    args = parser.parse_args()
    print(f"file | kernel | as recorded: before, after | spread {args.spread:.0f} µs: before, after")
    for path in args.files:
        shape = json.loads(path.read_text())
        for kernel in ("cand", "base"):
            recorded, noisy = medians(shape[kernel], None), medians(shape[kernel], args.spread)
            print(f"{path.name} | {kernel} | {recorded[0]:.0f}, {recorded[1]:.0f} | {noisy[0]:.0f}, {noisy[1]:.0f}")


if __name__ == "__main__":
    main()
