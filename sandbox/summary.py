"""A result's summary over its benchmark shapes (geometric means), shared by the worker and by
the orchestrator when a profiler's trace replaces the events' figures. Standard library only."""

from __future__ import annotations

import math
from typing import Any


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
