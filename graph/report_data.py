"""What a run's report shows, gathered from its archive into one typed object (plots and HTML
render it; tests check it against the archive)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from graph.archive import Archive
from graph.run_data import Baselines, baselines, headline, plan_title, seed_ratios, shape_results, source_diff

TOP_KERNELS = 3  # kernels whose per-shape results the report shows, besides the seed


class LeaderRow(BaseModel):
    rank: int
    id: str
    generation: int
    origin: str
    parents: list[str]
    geomean_us: float
    geomean_ci_us: tuple[float, float] | None = None
    noisy: bool = False
    vs_seed: float | None = None
    vs_seed_verified: bool = False  # vs_seed was measured side by side (graph/run_data.py's seed_ratios)
    vs_reference: float | None = None
    title: str


class KernelPoint(BaseModel):
    id: str
    generation: int
    origin: str
    status: str
    geomean_us: float | None = None
    title: str
    parent: str | None = None


class GenerationPoint(BaseModel):
    generation: int
    best_id: str | None
    best_geomean_us: float | None
    improved: bool = False


class SpendRow(BaseModel):
    role: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class ReportData(BaseModel):
    run_id: str
    problem: str
    target: str
    status: str
    stop_reason: str | None = None
    created_at: str | None = None
    seed_id: str | None = None
    seed_geomean_us: float | None = None
    best_id: str | None = None
    best_geomean_us: float | None = None
    best_geomean_ci_us: tuple[float, float] | None = None
    over_seed: float | None = None  # the crowned best against the seed: side by side where verified
    over_seed_text: str = ""  # with its interval and how it was measured
    baselines: Baselines
    leaderboard: list[LeaderRow]
    kernels: list[KernelPoint]
    generations: list[GenerationPoint]
    shape_times: dict[str, dict[str, float]] = Field(description="kernel id -> shape -> median µs (seed and best)")
    diff: str = ""  # the best kernel against the seed
    best_source: str = ""  # the best kernel in full, to read or copy from the report
    spend: list[SpendRow]
    directives: list[str]
    experiments: int = 0
    failed_experiments: int = 0

    @property
    def speedup_over_seed(self) -> float | None:
        return self.over_seed


def collect_report(archive: Archive, run_id: str, target: str) -> ReportData:
    top = headline(archive)
    seed, best = archive.seed(), top.best
    board = archive.leaderboard()
    base = baselines(archive)
    over_seed = seed_ratios(archive)
    rows = [
        LeaderRow(
            rank=rank,
            id=k.id,
            generation=k.generation,
            origin=k.origin,
            parents=k.parents,
            geomean_us=k.geomean_us or 0.0,
            geomean_ci_us=k.geomean_ci_us,
            noisy=k.noisy,
            vs_seed=over_seed(k)[0],
            vs_seed_verified=over_seed(k)[1],
            vs_reference=base.vs_reference(k),
            title=plan_title(k),
        )
        for rank, k in enumerate(board, 1)
    ]
    kernels = [
        KernelPoint(
            id=k.id,
            generation=k.generation,
            origin=k.origin,
            status=k.status,
            geomean_us=k.geomean_us if k.ok else None,
            title=plan_title(k),
            parent=k.parents[0] if k.parents else None,
        )
        for k in archive.kernels()
    ]
    generations = []
    if seed is not None and seed.ok:
        generations.append(GenerationPoint(generation=0, best_id=seed.id, best_geomean_us=seed.geomean_us))
    for g in archive.generations():
        generations.append(
            GenerationPoint(
                generation=g["generation"],
                best_id=g["best_id"],
                best_geomean_us=g["best_geomean_us"],
                improved=bool(g["summary"].get("improved")),
            )
        )
    shown = ([seed] if seed is not None and seed.ok else []) + [k for k in board if seed is None or k.id != seed.id]
    shape_times = {
        k.id: {r.shape: r.median_us for r in shape_results(archive, k) if r.median_us is not None}
        for k in shown[: TOP_KERNELS + 1]
    }
    experiments = archive.experiments()
    failed = sum(1 for e in experiments if not any(k.ok for k in archive.experiment_kernels(e.id)))
    return ReportData(
        run_id=run_id,
        problem=str(archive.get_meta("problem_name", "")),
        target=target,
        status=str(archive.get_meta("status", "created")),
        stop_reason=archive.get_meta("stop_reason"),
        created_at=archive.get_meta("created_at"),
        seed_id=seed.id if seed else None,
        seed_geomean_us=seed.geomean_us if seed else None,
        best_id=best.id if best else None,
        best_geomean_us=best.geomean_us if best else None,
        best_geomean_ci_us=best.geomean_ci_us if best else None,
        over_seed=top.over_seed,
        over_seed_text=top.seed_text(),
        baselines=base,
        leaderboard=rows,
        kernels=kernels,
        generations=generations,
        shape_times=shape_times,
        diff=source_diff(seed, best) if seed is not None and best is not None and best.id != seed.id else "",
        best_source=best.source if best else "",
        spend=[
            SpendRow(
                role=r, calls=s.calls, input_tokens=s.input_tokens, output_tokens=s.output_tokens, cost_usd=s.cost_usd
            )
            for r, s in archive.spend_by_role().items()
        ],
        directives=archive.directives(),
        experiments=len(experiments),
        failed_experiments=failed,
    )
