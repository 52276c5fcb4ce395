"""The report's figures as PNG files (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from graph.report_data import ReportData  # noqa: E402
from graph.run_data import num  # noqa: E402

REFERENCE_COLOR = "#d62728"  # the PyTorch reference
SOL_COLOR = "#2ca02c"  # the speed of light
BEST_COLOR = "#1f77b4"
FAILED_COLOR = "#7f7f7f"
KERNEL_COLORS = ["#9467bd", "#1f77b4", "#ff7f0e", "#8c564b", "#e377c2"]
DPI = 100


def _short(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 1] + "…"


def _legend(ax: Axes) -> None:
    """Beside the plot, never on it: inside, a legend covered the longest bars."""
    if ax.get_legend_handles_labels()[0]:  # an empty run draws no artists with labels
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


def _baseline_lines(ax: Axes, data: ReportData, horizontal: bool = True) -> None:
    draw = ax.axhline if horizontal else ax.axvline
    if data.baselines.reference_geomean_us:
        draw(data.baselines.reference_geomean_us, color=REFERENCE_COLOR, linestyle="--", label="PyTorch reference")
    if data.baselines.sol_geomean_us:
        draw(data.baselines.sol_geomean_us, color=SOL_COLOR, linestyle=":", label="speed of light")


def leaderboard_figure(data: ReportData, limit: int = 10) -> Figure:
    rows = data.leaderboard[:limit]
    fig, ax = plt.subplots(figsize=(8, 0.45 * max(len(rows), 2) + 1.2), dpi=DPI)
    labels = [f"{r.id} · {_short(r.title, 40)}" for r in rows]
    ax.barh(range(len(rows)), [r.geomean_us for r in rows], color=BEST_COLOR)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    _baseline_lines(ax, data, horizontal=False)
    ax.set_xscale("log")
    ax.set_xlabel("geometric mean over the benchmark shapes (µs, log scale)")
    ax.set_title("Leaderboard")
    _legend(ax)
    fig.tight_layout()
    return fig


def progress_figure(data: ReportData) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=DPI)
    ok = [k for k in data.kernels if k.geomean_us is not None]
    ax.scatter(
        [k.generation for k in ok], [k.geomean_us for k in ok], color="#aaaaaa", s=18, label="candidates", zorder=2
    )
    points = [g for g in data.generations if g.best_geomean_us is not None]
    ax.step(
        [g.generation for g in points],
        [g.best_geomean_us for g in points],
        where="post",
        color=BEST_COLOR,
        linewidth=2,
        marker="o",
        label="best so far",
        zorder=3,
    )
    failed = [k for k in data.kernels if k.geomean_us is None and k.origin != "seed"]
    if failed and ok:
        top = max(k.geomean_us for k in ok if k.geomean_us is not None) * 1.3
        ax.scatter([k.generation for k in failed], [top] * len(failed), marker="x", color=FAILED_COLOR, label="failed")
    _baseline_lines(ax, data)
    ax.set_yscale("log")
    ax.set_xlabel("generation")
    ax.set_ylabel("geometric mean (µs, log scale)")
    ax.set_title("Best time per generation")
    ax.xaxis.get_major_locator().set_params(integer=True)
    _legend(ax)
    fig.tight_layout()
    return fig


def shapes_figure(data: ReportData) -> Figure:
    shapes = data.baselines.shapes or sorted({s for times in data.shape_times.values() for s in times})
    series: list[tuple[str, list[float | None], str]] = []
    for i, (kernel_id, times) in enumerate(data.shape_times.items()):
        label = f"{kernel_id} (seed)" if kernel_id == data.seed_id else kernel_id
        series.append((label, [times.get(s) for s in shapes], KERNEL_COLORS[i % len(KERNEL_COLORS)]))
    if data.baselines.reference_us:
        series.append(("PyTorch reference", [data.baselines.reference_us.get(s) for s in shapes], REFERENCE_COLOR))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(shapes) + 3), 4.8), dpi=DPI)
    width = 0.8 / max(len(series), 1)
    for j, (label, values, color) in enumerate(series):
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(shapes))]
        present = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
        ax.bar([x for x, _ in present], [v for _, v in present], width=width, color=color, label=label)
    if data.baselines.sol_us:
        sols = [(i, data.baselines.sol_us.get(s)) for i, s in enumerate(shapes)]
        ax.scatter(
            [i for i, v in sols if v is not None],
            [v for _, v in sols if v is not None],
            marker="_",
            s=900,
            linewidths=2.5,
            color=SOL_COLOR,
            label="speed of light",
            zorder=3,
        )
    ax.set_xticks(range(len(shapes)), [_short(s, 24) for s in shapes], rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("median time (µs, log scale)")
    ax.set_title("Per-shape results of the best kernels")
    _legend(ax)
    fig.tight_layout()
    return fig


def lineage_figure(data: ReportData, max_kernels: int = 80) -> Figure:
    kernels = data.kernels[:max_kernels]
    by_generation: dict[int, list[str]] = {}
    for k in kernels:
        by_generation.setdefault(k.generation, []).append(k.id)
    position = {
        kid: (generation, lane - (len(ids) - 1) / 2)
        for generation, ids in by_generation.items()
        for lane, kid in enumerate(ids)
    }
    lanes = max((len(ids) for ids in by_generation.values()), default=1)
    fig, ax = plt.subplots(figsize=(max(7, 2.6 * len(by_generation)), max(3, 0.8 * lanes + 1.5)), dpi=DPI)
    best_path = _path_to_root(data)
    for k in kernels:
        if k.parent is None or k.parent not in position:
            continue
        (x0, y0), (x1, y1) = position[k.parent], position[k.id]
        on_best = k.id in best_path and k.parent in best_path
        ax.annotate(
            "",
            xy=(x1, y1),
            xytext=(x0, y0),
            arrowprops={"arrowstyle": "->", "color": BEST_COLOR if on_best else "#999999", "lw": 2 if on_best else 1},
        )
        ax.text((x0 + x1) / 2, (y0 + y1) / 2 + 0.12, _short(k.title, 28), fontsize=7, ha="center", color="#444444")
    for k in kernels:
        x, y = position[k.id]
        color = FAILED_COLOR if k.geomean_us is None else (BEST_COLOR if k.id == data.best_id else "#4c9f70")
        ax.scatter([x], [y], s=260, color=color, zorder=3, edgecolors="black" if k.id == data.best_id else "none")
        label = k.id + ("" if k.geomean_us is None else f"\n{num(k.geomean_us)} µs")
        ax.text(x, y - 0.3, label, fontsize=7, ha="center", va="top")
    ax.set_xticks(sorted(by_generation))
    ax.set_xlabel("generation")
    ax.set_yticks([])
    ax.set_ylim(-(lanes / 2) - 0.8, lanes / 2 + 0.6)
    ax.set_xlim(min(by_generation, default=0) - 0.6, max(by_generation, default=0) + 0.6)
    ax.set_title("Lineage (edges: the plan that made the child; blue: the path to the best)")
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig


def _path_to_root(data: ReportData) -> set[str]:
    parent = {k.id: k.parent for k in data.kernels}
    path: set[str] = set()
    current = data.best_id
    while current is not None and current not in path:
        path.add(current)
        current = parent.get(current)
    return path


def spend_figure(data: ReportData) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=DPI)
    roles = [s.role for s in data.spend]
    tokens = [s.input_tokens + s.output_tokens for s in data.spend]
    bars = ax.bar(roles, tokens, color=BEST_COLOR)
    for bar, s in zip(bars, data.spend, strict=True):
        ax.annotate(
            f"{s.calls} calls\n${s.cost_usd:.4f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_ylabel("tokens (input + output)")
    ax.set_title("LLM spend per role" if data.spend else "LLM spend per role (no LLM calls)")
    ax.margins(y=0.25)
    fig.tight_layout()
    return fig


FIGURES: dict[str, tuple[str, Callable[[ReportData], Figure]]] = {
    "leaderboard": ("Leaderboard: geometric mean of the fastest kernels", leaderboard_figure),
    "progress": ("Best time per generation against the PyTorch reference and the speed of light", progress_figure),
    "shapes": ("Per-shape times of the seed and the best kernels", shapes_figure),
    "lineage": ("Lineage tree with each edge's plan", lineage_figure),
    "spend": ("LLM spend per role", spend_figure),
}


def write_figures(data: ReportData, out_dir: Path) -> dict[str, Path]:
    """Each figure as `<name>.png` in out_dir; returns name -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for name, (_, make) in FIGURES.items():
        if (name == "leaderboard" and not data.leaderboard) or (name == "spend" and not data.spend):
            continue  # an empty axis says nothing; the page says "no LLM calls" in words
        fig = make(data)
        path = out_dir / f"{name}.png"
        fig.savefig(path, bbox_inches="tight")  # the legends sit outside the axes
        plt.close(fig)
        paths[name] = path
    return paths
