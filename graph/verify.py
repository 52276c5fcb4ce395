"""Verified wins: a kernel becomes the run's best only when a side-by-side timing says it is faster.

Each verdict times one kernel alone; on a loaded host one median can be far off, and a leader
crowned on it would steer every later generation. So when the leaderboard's top changes, the new
leader and the best it would replace are evaluated once more, in a fresh judge, each in a runner
of its own, timed in alternating rounds on the same fresh inputs (sandbox/judge/timed.py's
run_paired), in `TRIALS` fresh judges. The speed-up base/candidate comes with a 95% interval; only
"faster" in every one (the interval above 1 by more than the noise floor) crowns the candidate. Every such measurement is kept in the
run's archive as a `Verification`, with the command that repeats it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from graph.archive import Archive, KernelRecord
from sandbox.summary import geomean
from sandbox.verdict import Verdict

_META_KEY = "verifications"


class ShapeRatio(BaseModel):
    shape: str
    candidate_us: float
    base_us: float | None = None
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None


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
                         ratio_ci=b.paired.ratio_ci if b.paired else None) for b in verdict.benchmarks]
    reasons = [b.paired.error for b in verdict.benchmarks if b.paired and b.paired.error]
    if not verdict.passed:
        reasons.insert(0, f"{verdict.status.value}: {verdict.message[:300]}")
    return Verification(
        kernel_id=kernel.id, base_id=base.id, kernel_sha256=kernel.sha256, base_sha256=base.sha256,
        status=verdict.status.value, ratio=paired.ratio if paired else None,
        ratio_ci=paired.ratio_ci if paired else None, difference=paired.difference if paired else "not measured",
        shapes=shapes, host=verdict.host, reason="; ".join(reasons)[:1000],
        command=f"kernel-scientist verify {run_dir} {kernel.id} --against {base.id}",
    )


# Fresh judges a verification takes, each a paired evaluation of its own. One pair of runner
# processes can favour one of them for its whole life (where its memory lies, its core): on an idle
# 2-core host identical kernels were told apart by a single paired evaluation in 2 trials of 8, so
# a win must hold in each of these independent measurements.
TRIALS = 2


def combine(checks: list[Verification]) -> Verification:
    """Measurements of one pair in several fresh judges: a difference only where every one agrees;
    the ratio their geometric mean, the interval the span of theirs."""
    first = checks[0]
    differences = {c.difference for c in checks}
    ratios = [c.ratio for c in checks if c.ratio]
    spans = [c.ratio_ci for c in checks if c.ratio_ci]
    agreed = differences.pop() if len(differences) == 1 else "no measurable difference"
    measured = len(ratios) == len(checks)
    return first.model_copy(update={
        "status": next((c.status for c in checks if c.status != "ok"), "ok"),
        "ratio": geomean(ratios) if measured else None,
        "ratio_ci": (min(lo for lo, _ in spans), max(hi for _, hi in spans)) if measured and spans else None,
        "difference": agreed if measured else "not measured",
        "reason": "; ".join(c.reason for c in checks if c.reason)[:1000],
        "trials": [c.model_dump(mode="json", include={"ratio", "ratio_ci", "difference", "host"}) for c in checks],
    })


def record(archive: Archive, verification: Verification) -> None:
    """Keep the measurement with the run (newest last)."""
    kept = archive.get_meta(_META_KEY, []) or []
    kept.append(verification.model_dump(mode="json"))
    archive.set_meta(_META_KEY, kept)


def verifications(archive: Archive) -> list[Verification]:
    return [Verification.model_validate(v) for v in archive.get_meta(_META_KEY, []) or []]


def known(archive: Archive, kernel: KernelRecord, base: KernelRecord) -> Verification | None:
    """The latest measurement of this pair (by source), so a leader that lost is not re-timed every generation."""
    for v in reversed(verifications(archive)):
        if v.kernel_sha256 == kernel.sha256 and v.base_sha256 == base.sha256:
            return v
    return None
