"""Statistics of timings: over one shape's repetitions, and over a result's shapes (geometric
means). Shared by the worker and by the orchestrator when a profiler's trace replaces the
events' figures. Standard library only."""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any


def num(value: float | None) -> str:
    """A time or other measurement as every screen shows it: a few significant digits, no
    e-notation, no thousands separators, so one number reads the same in a verdict, a leaderboard
    and a report."""
    if value is None:
        return "-"
    size = abs(value)
    if size >= 1000:
        return f"{value:.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 1:
        return f"{value:.2f}"
    if size >= 0.001 or size == 0:
        return f"{value:.3g}"
    return f"{value:.6f}".rstrip("0")


def geomean(values: list[float | None]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def summarise_benchmarks(benchmarks: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomean time, the reference's geomean, the speed-up and % of speed of light."""
    medians = [b["median_us"] for b in benchmarks]
    refs = [b.get("reference_median_us") for b in benchmarks]
    sols = [b.get("pct_sol") for b in benchmarks]
    geo = geomean(medians)
    ref_geo = geomean(refs) if refs and all(refs) else None
    return {
        "geomean_us": geo,
        "reference_geomean_us": ref_geo,
        "speedup": ref_geo / geo if ref_geo and geo else None,
        "pct_sol_geomean": geomean(sols) if sols and all(sols) else None,
    }


@dataclass
class TimingStats:
    reps: int
    median_us: float
    mean_us: float
    std_us: float
    stderr_us: float
    min_us: float
    max_us: float
    p25_us: float
    p75_us: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(samples_us: list[float]) -> TimingStats:
    ordered = sorted(samples_us)
    n = len(ordered)
    mean = statistics.fmean(ordered)
    std = statistics.stdev(ordered) if n > 1 else 0.0
    quartiles = statistics.quantiles(ordered, n=4) if n > 1 else [ordered[0]] * 3
    return TimingStats(
        reps=n,
        median_us=statistics.median(ordered),
        mean_us=mean,
        std_us=std,
        stderr_us=std / math.sqrt(n) if n > 1 else 0.0,
        min_us=ordered[0],
        max_us=ordered[-1],
        p25_us=quartiles[0],
        p75_us=quartiles[2],
    )
