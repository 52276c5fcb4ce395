"""Statistics of timings: over one shape's repetitions, and over a result's shapes (geometric
means). Shared by the worker and by the orchestrator when a profiler's trace replaces the
events' figures. Standard library only."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
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


def num_interval(value: float | None, interval: Sequence[float] | None, unit: str = "") -> str:
    """A measurement with its 95% interval, as every screen and prompt shows it: `412 [398–430] µs`."""
    text = num(value)
    if value is not None and interval and len(interval) == 2:
        text += f" [{num(interval[0])}–{num(interval[1])}]"
    return f"{text} {unit}".rstrip() if value is not None else text


def unpaired_ratio(base_us: float | None, base_ci: Sequence[float] | None, candidate_us: float | None,
                   candidate_ci: Sequence[float] | None) -> tuple[float, tuple[float, float] | None, str] | None:
    """base / candidate from two separate timings, with the widest interval their own intervals allow
    (no pairing to cancel the host's drift, so no narrower claim is honest), and what it means."""
    if not base_us or not candidate_us:
        return None
    ratio = base_us / candidate_us
    if not base_ci or not candidate_ci or min(*base_ci, *candidate_ci) <= 0:
        return ratio, None, "no measurable difference"
    interval = (base_ci[0] / candidate_ci[1], base_ci[1] / candidate_ci[0])
    return ratio, interval, difference(*interval)


def geomean(values: Sequence[float | None]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


# Confidence of every interval the project reports, and the normal quantile that goes with it.
CONFIDENCE = 0.95
Z95 = 1.959964
# A paired ratio within this much of 1 is no difference worth a lesson, even when its interval is tight.
# A pair of runner processes favours one kernel by a few percent for its whole life (where the scheduler
# keeps each, where its memory lies), which no interval of its own rounds can see: identical kernels on
# this project's 2-core VM were called different in 8 of 60 stored trials at 1%, 3 of 60 at 2%, while a
# 10% pair was called faster in 35 and 29 of 48 (bench/paired_accuracy.py --reanalyse; docs/BENCHMARKS.md).
NOISE_FLOOR = 0.02
MAX_KEPT_ROUNDS = 400  # a paired shape's per-round ratios kept in its verdict


def median_interval(samples: list[float]) -> tuple[float, float]:
    """A distribution-free 95% interval of the median: the order statistics whose ranks the binomial
    (normal approximation) puts around the middle. No resampling, so the same samples always give
    the same interval; with fewer than 6 samples it is the whole range."""
    ordered = sorted(samples)
    n = len(ordered)
    if n < 6:
        return ordered[0], ordered[-1]
    half = Z95 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return ordered[lo], ordered[hi]


def geomean_interval(medians: list[float], intervals: list[tuple[float, float]]) -> tuple[float, float] | None:
    """An interval of the geometric mean of per-shape medians: each shape's interval, as a spread in
    log space, combined as independent errors of a mean of logs."""
    if not medians or len(medians) != len(intervals) or any(m <= 0 or lo <= 0 for m, (lo, _) in zip(medians, intervals, strict=True)):
        return None
    logs = [math.log(m) for m in medians]
    spreads = [(math.log(hi) - math.log(lo)) / (2 * Z95) for lo, hi in intervals]
    centre = sum(logs) / len(logs)
    half = Z95 * math.sqrt(sum(s * s for s in spreads)) / len(logs)
    return math.exp(centre - half), math.exp(centre + half)


def shift_interval(logs: list[float]) -> tuple[float, float, float]:
    """The centre of paired log-ratios and its 95% interval: the Hodges-Lehmann estimate (the median
    of all pairwise means) with the Wilcoxon signed-rank interval. Why not the plain median: for
    rounds whose noise is symmetric (alternating order makes it so for two equal kernels) this
    interval is about a fifth narrower for the same rounds, so a real 10% difference is told apart
    in fewer of them; it stays distribution-free and robust to a few stolen rounds. With fewer than
    6 rounds the interval is the whole range of the pairwise means."""
    n = len(logs)
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    m = len(walsh)
    centre = statistics.median(walsh)
    if n < 6:
        return centre, walsh[0], walsh[-1]
    spread = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    k = max(0, math.floor(m / 2 - Z95 * spread))
    return centre, walsh[k], walsh[m - 1 - k]


# Consecutive blocks of rounds for the busy-host interval, and Student's t for their means (3 df).
BUSY_BLOCKS = 4
_T95_3DF = 3.182446


def block_interval(logs: list[float]) -> tuple[float, float]:
    """A 95% interval of the mean log-ratio from the means of consecutive blocks of rounds (batch
    means): where the host's load comes in bursts, neighbouring rounds share their luck and the
    rank interval, which takes rounds as independent, is too narrow; blocks that disagree widen
    this one. Fewer than two rounds a block: the whole range of the rounds."""
    n = len(logs)
    if n < 2 * BUSY_BLOCKS:
        return min(logs), max(logs)
    size = n // BUSY_BLOCKS
    means = [statistics.fmean(logs[b * size:(b + 1) * size if b < BUSY_BLOCKS - 1 else n]) for b in range(BUSY_BLOCKS)]
    centre, half = statistics.fmean(means), _T95_3DF * statistics.stdev(means) / math.sqrt(BUSY_BLOCKS)
    return centre - half, centre + half


def paired_summary(ratios: list[float], busy: bool = False, busy_rounds: int = 2 * BUSY_BLOCKS) -> dict[str, Any]:
    """A paired speed-up (base time / candidate time per round, in the order timed): its estimate,
    interval, and what it means, with the rounds' own ratios kept so that anyone can re-analyse them.
    `busy`: other work wanted the cores during the rounds, so the interval also covers the
    disagreement between blocks of rounds (`block_interval`), and a burst that favoured one kernel
    for a while is not taken for a difference; with fewer than `busy_rounds` rounds nothing is
    decided. One evaluation asks for more rounds than the blocks need (its rounds share one pair of
    processes and one stretch of the host's load); rounds pooled from separate verifications, the
    blocks' two each."""
    finite = [r for r in ratios if math.isfinite(r) and r > 0]
    if not finite:
        return {"ratio": None, "ratio_ci": None, "ratios": len(ratios), "difference": "not measured"}
    logs = [math.log(r) for r in finite]
    centre, lo, hi = shift_interval(logs)
    undecided = busy and len(logs) < max(busy_rounds, 2 * BUSY_BLOCKS)
    if busy:
        block_lo, block_hi = block_interval(logs)
        lo, hi = min(lo, block_lo), max(hi, block_hi)
    if undecided:
        # Too few rounds to tell a burst of load that favoured one kernel from a difference (a busy
        # host whose rounds are long reaches the paired cap after 4-11 of them, and identical kernels
        # read 0.90 [0.83-0.98] from 11): the interval spans the noise floor both ways, so neither this
        # shape nor a geomean leaning on it decides.
        lo, hi = min(lo, -math.log1p(NOISE_FLOOR)), max(hi, math.log1p(NOISE_FLOOR))
    summary = {"ratio": math.exp(centre), "ratio_ci": [math.exp(lo), math.exp(hi)], "ratios": len(finite),
               "difference": difference(math.exp(lo), math.exp(hi)), "busy_host": busy,
               "round_ratios": [round(r, 4) for r in finite[:MAX_KEPT_ROUNDS]]}
    if undecided:
        summary["undecided"] = (f"busy host: {len(logs)} rounds, {max(busy_rounds, 2 * BUSY_BLOCKS)} needed to tell "
                                "bursts of load from a difference")
    return summary


def difference(lo: float, hi: float) -> str:
    """What a speed-up interval says: faster, slower, or no measurable difference."""
    if lo > 1 + NOISE_FLOOR:
        return "faster"
    if hi < 1 / (1 + NOISE_FLOOR):
        return "slower"
    return "no measurable difference"


def summarise_benchmarks(benchmarks: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomean time with its interval, the reference's geomean, the speed-up, % of speed of light,
    and (when the shapes were timed side by side with a base) the geomean paired speed-up."""
    medians = [b["median_us"] for b in benchmarks]
    refs = [b.get("reference_median_us") for b in benchmarks]
    sols = [b.get("pct_sol") for b in benchmarks]
    geo = geomean(medians)
    ref_geo = geomean(refs) if refs and all(refs) else None
    cis = [(c[0], c[1]) for b in benchmarks if (c := b.get("ci_us"))]
    geo_ci = geomean_interval(medians, cis) if len(cis) == len(medians) else None
    summary: dict[str, Any] = {
        "geomean_us": geo,
        "geomean_ci_us": list(geo_ci) if geo_ci else None,
        "reference_geomean_us": ref_geo,
        "speedup": ref_geo / geo if ref_geo and geo else None,
        "pct_sol_geomean": geomean(sols) if sols and all(sols) else None,
    }
    paired = [p for b in benchmarks if (p := b.get("paired")) and p.get("ratio")]
    if paired and len(paired) == len(benchmarks):
        ratios = [float(p["ratio"]) for p in paired]
        ci = geomean_interval(ratios, [(p["ratio_ci"][0], p["ratio_ci"][1]) for p in paired])
        summary["paired"] = {"ratio": geomean(ratios), "ratio_ci": list(ci) if ci else None,
                             "difference": difference(*ci) if ci else "not measured"}
    return summary


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
    ci_us: tuple[float, float] = (0.0, 0.0)  # 95% interval of the median (`median_interval`)

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
        ci_us=median_interval(ordered),
    )
