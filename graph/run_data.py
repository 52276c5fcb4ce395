"""Reads of a run's archive that the chat's tools and the report share: per-shape results against
the PyTorch reference and the speed of light, lineage, diffs, why an experiment failed."""

from __future__ import annotations

import difflib
import json
import math
import statistics
from collections.abc import Callable, Iterable

from pydantic import BaseModel

from graph.archive import Archive, ExperimentRecord, KernelRecord
from sandbox.summary import num as num  # the one number format: chat, report and terminal
from sandbox.summary import num_interval as num_interval


class ShapeResult(BaseModel):
    shape: str
    median_us: float | None = None
    reference_us: float | None = None  # the problem's reference implementation (PyTorch)
    sol_us: float | None = None  # the speed of light: max(FLOPs / peak, bytes / bandwidth)


class Baselines(BaseModel):
    """Per-shape times every kernel is measured against, and their geometric means."""

    shapes: list[str]
    reference_us: dict[str, float]
    sol_us: dict[str, float]

    @property
    def reference_geomean_us(self) -> float | None:
        return geomean(self.reference_us.get(s) for s in self.shapes)

    @property
    def sol_geomean_us(self) -> float | None:
        return geomean(self.sol_us.get(s) for s in self.shapes)

    def vs_reference(self, kernel: KernelRecord) -> float | None:
        """The kernel's speed against the run's one PyTorch baseline (not its own verdict's reference
        timing, which moves with the host from one verdict to the next)."""
        ref = self.reference_geomean_us
        return ref / kernel.geomean_us if ref and kernel.geomean_us else None


def geomean(values: Iterable[float | None]) -> float | None:
    items = list(values)
    if not items or any(v is None or v <= 0 for v in items):
        return None
    return math.exp(sum(math.log(v) for v in items if v is not None) / len(items))


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


# Under a leaderboard: what the mark on a "vs seed" figure means.
VERIFIED_MARK = "✓"
VERIFIED_NOTE = f"{VERIFIED_MARK}: timed beside the seed in fresh judges; other ratios divide two separate timings"


def seed_ratios(archive: Archive) -> Callable[[KernelRecord], tuple[float | None, bool]]:
    """Each kernel's speed over the seed as the leaderboards show it: the side-by-side measurement
    where the run made one of that pair (True), else the ratio of the two separate timings (False),
    which a busy host can move far (issue 14: 5.59x apart, 5.20x side by side, for one pair)."""
    from graph import verify

    seed = archive.seed()
    checks = {(v.kernel_sha256, v.base_sha256): v for v in verify.verifications(archive)}  # the latest per pair

    def over_seed(kernel: KernelRecord) -> tuple[float | None, bool]:
        if seed is None or not seed.geomean_us or not kernel.geomean_us:
            return None, False
        if kernel.id == seed.id:
            return 1.0, False
        check = checks.get((kernel.sha256, seed.sha256))
        if check is not None and check.ratio is not None:
            return check.ratio, True
        return seed.geomean_us / kernel.geomean_us, False

    return over_seed


def seed_ratio_text(value: float | None, verified: bool) -> str:
    return ratio(value) + (f" {VERIFIED_MARK}" if verified and value is not None else "")


class Headline(BaseModel):
    """The run's result as every screen states it: the crowned best, its time with its interval, and
    its speed over the seed, verified side by side where the run measured the pair that way."""

    best: KernelRecord | None = None
    seed: KernelRecord | None = None
    over_seed: float | None = None
    over_seed_ci: tuple[float, float] | None = None
    verified: bool = False  # over_seed comes from a side-by-side timing in fresh judges
    difference: str = "not measured"

    def best_text(self) -> str:
        if self.best is None:
            return "no timed kernel yet"
        text = f"best {self.best.id}: {num_interval(self.best.geomean_us, self.best.geomean_ci_us, 'µs')}"
        return text + (" (timed on a busy host)" if self.best.noisy else "")

    def seed_text(self) -> str:
        """`1.23x [1.18–1.29] the seed, verified side by side`, or the unverified ratio of two timings."""
        if self.over_seed is None or self.best is None or self.seed is None or self.best.id == self.seed.id:
            return ""
        within = f" [{num(self.over_seed_ci[0])}–{num(self.over_seed_ci[1])}]" if self.over_seed_ci else ""
        how = "verified side by side" if self.verified else "unverified: two separate timings"
        return f"{ratio(self.over_seed)}{within} the seed ({self.difference}, {how})"


def headline(archive: Archive) -> Headline:
    from graph import verify
    from sandbox.summary import unpaired_ratio

    best, seed = archive.run_best(), archive.seed()
    if best is None or seed is None or not seed.ok:
        return Headline(best=best, seed=seed)
    check = verify.known(archive, best, seed) if best.id != seed.id else None
    if check is not None and check.ratio is not None:
        return Headline(best=best, seed=seed, over_seed=check.ratio, over_seed_ci=check.ratio_ci, verified=True,
                        difference=check.difference)
    compared = unpaired_ratio(seed.geomean_us, seed.geomean_ci_us, best.geomean_us, best.geomean_ci_us)
    if compared is None:
        return Headline(best=best, seed=seed)
    return Headline(best=best, seed=seed, over_seed=compared[0], over_seed_ci=compared[1], difference=compared[2])


def shape_results(archive: Archive, kernel: KernelRecord) -> list[ShapeResult]:
    """The kernel's per-shape medians with the reference and speed-of-light times of its verdict."""
    verdict_json = archive.kernel_verdict(kernel.id)
    rows: list[ShapeResult] = []
    if verdict_json:
        for bench in json.loads(verdict_json).get("benchmarks") or []:
            rows.append(
                ShapeResult(
                    shape=bench["shape"],
                    median_us=bench.get("median_us") if kernel.ok else None,
                    reference_us=bench.get("reference_median_us"),
                    sol_us=bench.get("sol_us"),
                )
            )
    if not rows:
        rows = [ShapeResult(shape=s, median_us=t) for s, t in kernel.benchmarks.items()]
    return rows


def baselines(archive: Archive) -> Baselines:
    """Reference and speed-of-light times per shape: the run's one PyTorch baseline. The reference is
    timed again with every kernel; its median over the run's timed kernels smooths the noise of
    single measurements, and every "x PyTorch" of the run divides by it."""
    shapes: list[str] = []
    reference: dict[str, list[float]] = {}
    sol: dict[str, float] = {}
    seen: set[str] = set()
    for kernel in archive.leaderboard():
        if kernel.sha256 in seen:
            continue
        seen.add(kernel.sha256)
        for row in shape_results(archive, kernel):
            if row.shape not in shapes:
                shapes.append(row.shape)
            if row.reference_us is not None:
                reference.setdefault(row.shape, []).append(row.reference_us)
            if row.sol_us is not None:
                sol.setdefault(row.shape, row.sol_us)
    return Baselines(shapes=shapes, reference_us={s: statistics.median(v) for s, v in reference.items()}, sol_us=sol)


def ancestry(archive: Archive, kernel_id: str) -> list[KernelRecord]:
    """The kernel and its first parents back to the seed (the kernel first)."""
    chain: list[KernelRecord] = []
    seen: set[str] = set()
    current = archive.kernel(kernel_id)
    while current is not None and current.id not in seen:
        chain.append(current)
        seen.add(current.id)
        current = archive.kernel(current.parents[0]) if current.parents else None
    return chain


def children(kernels: list[KernelRecord]) -> dict[str, list[KernelRecord]]:
    result: dict[str, list[KernelRecord]] = {}
    for kernel in kernels:
        if kernel.parents:
            result.setdefault(kernel.parents[0], []).append(kernel)
    return result


def plan_title(kernel: KernelRecord) -> str:
    if kernel.origin == "seed":
        return "seed"
    return str((kernel.plan or {}).get("title") or kernel.summary)


def source_diff(old: KernelRecord, new: KernelRecord, context: int = 3) -> str:
    """A unified diff from one kernel's source to another's."""
    lines = difflib.unified_diff(
        old.source.splitlines(keepends=True),
        new.source.splitlines(keepends=True),
        fromfile=f"{old.id} ({plan_title(old)})",
        tofile=f"{new.id} ({plan_title(new)})",
        n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def failure_reason(archive: Archive, experiment: ExperimentRecord) -> str | None:
    """Why an experiment produced no correct kernel, from its attempts, its step and its finding;
    None when it did."""
    attempts = archive.experiment_kernels(experiment.id)
    if any(k.ok for k in attempts):
        return None
    if attempts:
        last = attempts[-1]
        return f"{last.status} (attempt {last.attempt}, kernel {last.id}): {last.message.strip()[:1500]}"
    if experiment.status == "error":
        return experiment.step
    finding = experiment.finding or {}
    if finding.get("status"):
        return f"{finding['status']}: {finding.get('explanation', '')}".strip()
    return f"{experiment.status}: {experiment.step}" if experiment.status != "done" else None
