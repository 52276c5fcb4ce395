"""Verified wins: a kernel becomes the run's best only when a side-by-side timing says it is faster.

Each verdict times one kernel alone; on a loaded host one median can be far off, and a leader
crowned on it would steer every later generation. So when the leaderboard's top changes, the new
leader and the best it would replace are evaluated once more, in a fresh judge, each in a runner
of its own, timed in alternating rounds on the same fresh inputs (sandbox/judge/timed.py's
run_paired), in `TRIALS` fresh judges whose rounds are pooled. The speed-up base/candidate comes
with a 95% interval; only "faster" (the interval above 1 by more than the noise floor) crowns the
candidate. Every such measurement is kept in the run's archive as a `Verification`, with the
command that repeats it.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from graph.archive import Archive, KernelRecord
from sandbox.summary import Z95, difference, geomean, geomean_interval, paired_summary
from sandbox.verdict import Verdict

_META_KEY = "verifications"


class ShapeRatio(BaseModel):
    shape: str
    candidate_us: float
    base_us: float | None = None
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    round_ratios: list[float] = Field(default_factory=list)  # each round's base / candidate
    busy_host: bool = False  # timed while other work wanted the cores (sandbox/summary.py's paired_summary)


class Verification(BaseModel):
    """One side-by-side measurement of a candidate against a base."""

    kernel_id: str
    base_id: str
    kernel_sha256: str
    base_sha256: str
    status: str  # the candidate's verdict in the paired evaluation
    ratio: float | None = None  # geomean of base time / candidate time over the shapes
    ratio_ci: tuple[float, float] | None = None
    difference: str = "not measured"  # faster, slower, no measurable difference, not measured
    shapes: list[ShapeRatio] = Field(default_factory=list)
    host: dict[str, Any] | None = None
    reason: str = ""  # why the verification could not measure, when it could not
    base_failed: bool = False  # the candidate passed and the base did not: it failed a check, a bound or a limit
    trials: list[dict[str, Any]] = Field(default_factory=list)  # each fresh judge's own measurement
    command: str = ""
    created_at: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def confirmed(self) -> bool:
        return self.status == "ok" and self.difference == "faster"

    def describe(self) -> str:
        if self.ratio is None or self.ratio_ci is None:
            return f"{self.kernel_id} against {self.base_id}: not measured ({self.reason or self.status})"
        lo, hi = self.ratio_ci
        return (f"{self.kernel_id} against {self.base_id}: {self.ratio:.3f}× (95% interval {lo:.3f}–{hi:.3f}), "
                f"{self.difference}")


def from_verdict(verdict: Verdict, kernel: KernelRecord, base: KernelRecord, run_dir: str) -> Verification:
    """The verification a paired verdict amounts to."""
    paired = verdict.summary.paired if verdict.summary else None
    shapes = [ShapeRatio(shape=b.shape, candidate_us=b.median_us,
                         base_us=b.paired.base_median_us if b.paired else None,
                         ratio=b.paired.ratio if b.paired else None,
                         ratio_ci=b.paired.ratio_ci if b.paired else None,
                         round_ratios=b.paired.round_ratios if b.paired else [],
                         busy_host=bool(b.paired and b.paired.busy_host)) for b in verdict.benchmarks]
    reasons = [b.paired.error for b in verdict.benchmarks if b.paired and b.paired.error]
    reasons += [e for e in verdict.errors if e.startswith("the base kernel")][:1]  # it did not load or pass
    base_failed = verdict.passed and bool(reasons)  # each such reason is the base's (sandbox/judge/evaluation.py)
    if not verdict.passed:
        reasons.insert(0, f"{verdict.status.value}: {verdict.message[:300]}")
    return Verification(
        kernel_id=kernel.id, base_id=base.id, kernel_sha256=kernel.sha256, base_sha256=base.sha256,
        status=verdict.status.value, ratio=paired.ratio if paired else None,
        ratio_ci=paired.ratio_ci if paired else None, difference=paired.difference if paired else "not measured",
        shapes=shapes, host=verdict.host, reason="; ".join(reasons)[:1000], base_failed=base_failed,
        command=f"kernel-scientist verify {run_dir} {kernel.id} --against {base.id}",
    )


# Fresh judges a verification takes, each a paired evaluation of its own: a pair of runner
# processes that favoured one kernel for its whole life (where its memory lies, its core) weighs
# only half of the rounds, and twice the rounds narrow the interval by about 1.4.
TRIALS = 2


def combine(checks: list[Verification]) -> Verification:
    """Measurements of one pair in several fresh judges, as one: per shape, the rounds of every judge
    pooled into one paired estimate and interval (sandbox/summary.py's paired_summary), then the
    geometric mean over the shapes. Where a judge kept no rounds (an older archive) a difference
    holds only where every judge agrees, and the interval is the span of theirs."""
    first = checks[0]
    measured = all(c.ratio for c in checks)
    pooled = _pooled(checks) if measured else None
    ratio: float | None
    interval: tuple[float, float] | None
    if pooled is not None:
        ratio, interval, said, shapes = pooled
    else:
        differences = {c.difference for c in checks}
        said = differences.pop() if len(differences) == 1 else "no measurable difference"
        spans = [c.ratio_ci for c in checks if c.ratio_ci]
        ratio = geomean([c.ratio for c in checks]) if measured else None
        interval = (min(lo for lo, _ in spans), max(hi for _, hi in spans)) if measured and spans else None
        shapes = first.shapes
    return first.model_copy(update={
        "status": next((c.status for c in checks if c.status != "ok"), "ok"),
        "ratio": ratio,
        "ratio_ci": interval,
        "difference": said if measured else "not measured",
        "shapes": shapes,
        "reason": "; ".join(c.reason for c in checks if c.reason)[:1000],
        "base_failed": any(c.base_failed for c in checks),
        "trials": [c.model_dump(mode="json", include={"ratio", "ratio_ci", "difference", "host"}) for c in checks],
    })


def _pooled(checks: list[Verification]) -> tuple[float, tuple[float, float], str, list[ShapeRatio]] | None:
    """Every judge's rounds pooled per shape; None unless every judge kept rounds for the same shapes."""
    names = [s.shape for s in checks[0].shapes]
    if not names or any([s.shape for s in c.shapes] != names or not all(s.round_ratios for s in c.shapes) for c in checks):
        return None
    shapes = []
    for i in range(len(names)):
        rounds = [r for c in checks for r in c.shapes[i].round_ratios]
        summary = paired_summary(rounds, busy=any(c.shapes[i].busy_host for c in checks))
        shapes.append(checks[0].shapes[i].model_copy(update={
            "ratio": summary["ratio"], "ratio_ci": tuple(summary["ratio_ci"]), "round_ratios": rounds}))
    ratios = [s.ratio for s in shapes if s.ratio]
    interval = geomean_interval(ratios, [s.ratio_ci for s in shapes if s.ratio_ci])
    centre = geomean(ratios)
    if centre is None or interval is None:
        return None
    interval = _with_judge_spread(centre, interval, checks)
    return centre, interval, difference(*interval), shapes


def _with_judge_spread(centre: float, interval: tuple[float, float], checks: list[Verification]) -> tuple[float, float]:
    """The pooled interval widened by how much the fresh judges disagree beyond their own intervals.

    A pair of runner processes can favour one kernel for its whole life (on a 2-core VM, by a few
    percent: the vCPU each was kept on), a factor shared by every round of that judge, so the rounds'
    interval cannot see it. The judges' own estimates can: the DerSimonian-Laird between-judge
    variance of their log-ratios, added to the pooled estimate's as the variance of a mean over the
    judges. Judges that agree leave the interval as it was."""
    logs, variances = [], []
    for check in checks:
        if not check.ratio or not check.ratio_ci or min(check.ratio_ci) <= 0:
            return interval
        logs.append(math.log(check.ratio))
        variances.append(max(((math.log(check.ratio_ci[1]) - math.log(check.ratio_ci[0])) / (2 * Z95)) ** 2, 1e-12))
    if len(logs) < 2:
        return interval
    weights = [1 / v for v in variances]
    mean = sum(w * y for w, y in zip(weights, logs, strict=True)) / sum(weights)
    q = sum(w * (y - mean) ** 2 for w, y in zip(weights, logs, strict=True))
    spread = max(0.0, (q - (len(logs) - 1)) / (sum(weights) - sum(w * w for w in weights) / sum(weights)))
    half = (math.log(interval[1]) - math.log(interval[0])) / 2
    half = math.sqrt(half * half + Z95 * Z95 * spread / len(logs))
    return centre * math.exp(-half), centre * math.exp(half)


def record(archive: Archive, verification: Verification) -> None:
    """Keep the measurement with the run (newest last)."""
    kept = archive.get_meta(_META_KEY, []) or []
    kept.append(verification.model_dump(mode="json"))
    archive.set_meta(_META_KEY, kept)


def verifications(archive: Archive) -> list[Verification]:
    return [Verification.model_validate(v) for v in archive.get_meta(_META_KEY, []) or []]


def known(archive: Archive, kernel: KernelRecord, base: KernelRecord) -> Verification | None:
    """The latest measurement of this pair (by source), measured or not: what the views show."""
    checks = _of_pair(archive, kernel, base)
    return checks[-1] if checks else None


# Measurements a pair may take before "not measured" is its answer. A pair goes unmeasured when a runner in it was
# refused or failed: on a GPU that is mostly the judge's clock on an honest kernel (3 of 28 paired trials of a
# quarter-millisecond kernel on the lent H100, docs/BENCHMARKS.md, nineteenth session), and a best whose runner fails
# as a base must not keep every challenger unmeasured by one unlucky draw.
UNMEASURED_TRIES = 2


def settled(archive: Archive, kernel: KernelRecord, base: KernelRecord) -> Verification | None:
    """The measurement of this pair that stands, so that a leader that lost is not re-timed every generation: the
    latest, once it measured the pair or once the pair has been left unmeasured UNMEASURED_TRIES times; None while the
    pair is still to be measured (again)."""
    checks = _of_pair(archive, kernel, base)
    if checks and (checks[-1].ratio is not None or len(checks) >= UNMEASURED_TRIES):
        return checks[-1]
    return None


def _of_pair(archive: Archive, kernel: KernelRecord, base: KernelRecord) -> list[Verification]:
    return [v for v in verifications(archive) if v.kernel_sha256 == kernel.sha256 and v.base_sha256 == base.sha256]
