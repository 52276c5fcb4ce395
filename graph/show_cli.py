"""`kernel-scientist show [RUN] [KERNEL]` and `kernel-scientist compare [RUN] A B`: look at a kernel
(its source, per-shape times with their spread, verdict and static report) and put two side by side,
re-timed now under the same conditions, with the diff between their sources."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from graph.report_cli import opened_run
from graph.terminal import RUNS_DIR_HELP, console, fail, working

if TYPE_CHECKING:  # the commands import what they use when they run: --help stays instant
    from rich.syntax import Syntax
    from rich.table import Table

    from graph.archive import Archive, KernelRecord
    from sandbox.verdict import Verdict


def code_view(code: str, lexer: str, line_numbers: bool = False, word_wrap: bool = False) -> Syntax:
    """Source or a diff, highlighted on a terminal; off one (a pipe, a log) without the theme's
    background, which pads every line with spaces to the console's width."""
    from rich.syntax import Syntax

    background = None if console.is_terminal else "default"
    return Syntax(code, lexer, line_numbers=line_numbers, word_wrap=word_wrap, background_color=background)


def find_kernel(archive: Archive, kernel_id: str | None) -> KernelRecord:
    """A kernel by id, or the run's best (the seed when nothing passed); exit 2 naming the ids there are."""
    kernel = archive.kernel(kernel_id) if kernel_id else (archive.run_best() or archive.seed())
    if kernel is None:
        known = ", ".join(k.id for k in archive.kernels()[:12]) or "none yet"
        fail(f"no kernel {kernel_id!r} in this run (kernels: {known})" if kernel_id else "this run has no kernels yet")
    return kernel


def split_run_and_kernels(args: list[str], kernels: int, runs_dir: Path | None) -> tuple[str | None, list[str]]:
    """RUN is optional before the kernel ids: with one argument more than the kernels asked for, the
    first names the run; otherwise the latest run is meant. A lone argument of `show` may be either."""
    from graph.run_handle import RunError, open_run

    if len(args) > kernels:
        return args[0], args[1:]
    if kernels == 1 and len(args) == 1:
        try:
            open_run(args[0], runs_dir)
            return args[0], []
        except RunError:
            return None, args
    return None, args


def show_command(
    args: list[str] = typer.Argument(
        None, metavar="[RUN] [KERNEL]", help="The run (default: the latest) and a kernel id (default: its best)."
    ),
    diff: bool = typer.Option(False, "--diff", help="Also show the diff from the kernel's parent."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """A kernel's source, per-shape times with their spread, its verdict and static report."""
    from graph.run_data import plan_title, source_diff
    from sandbox.report import render_verdict
    from sandbox.verdict import Verdict

    run, rest = split_run_and_kernels(list(args or []), 1, runs_dir)
    if len(rest) > 1:
        fail("show takes [RUN] [KERNEL]")
    with opened_run(run, runs_dir) as (handle, archive):
        kernel = find_kernel(archive, rest[0] if rest else None)
        head = f"[bold]{kernel.id}[/bold] of {handle.run_id}: generation {kernel.generation}, {kernel.origin}"
        if kernel.parents:
            head += f" from {', '.join(kernel.parents)}"
        console.print(head, highlight=False)
        console.print(f"plan: {plan_title(kernel)}", highlight=False)
        if kernel.ok and kernel.geomean_us:
            console.print(speed_line(archive, kernel), highlight=False, soft_wrap=True)
        console.print(code_view(kernel.source, "python", line_numbers=True, word_wrap=True))
        if diff and kernel.parents and (parent := archive.kernel(kernel.parents[0])) is not None:
            console.print(code_view(source_diff(parent, kernel), "diff"))
        verdict_json = archive.kernel_verdict(kernel.id)
        if verdict_json:
            render_verdict(Verdict.from_json(verdict_json), console)
        else:
            console.print(f"[yellow]no verdict stored[/yellow]: {kernel.status} {kernel.message}")
        if handle.config.target == "cpu":
            print_vectorisation_report(kernel)


def speed_line(archive: Archive, kernel: KernelRecord) -> str:
    """The kernel's time with its interval, and its speed over the seed and over PyTorch with the
    leaderboards' own figures (graph/run_data.py's seed_ratios): `show` once said 1.53x the seed
    (two separate timings) where `status` said 0.74x ✓ (side by side) for the same kernel."""
    from graph.run_data import VERIFIED_MARK, baselines, num_interval, ratio, seed_ratio_text, seed_ratios

    over_seed, verified = seed_ratios(archive)(kernel)
    vs_reference = baselines(archive).vs_reference(kernel)
    how = f" ({VERIFIED_MARK}: timed beside it in fresh judges)" if verified else ""
    return (
        f"{num_interval(kernel.geomean_us, kernel.geomean_ci_us, 'µs')} geometric mean [95% interval]"
        + (f": {seed_ratio_text(over_seed, verified)} the seed{how}" if over_seed is not None else "")
        + (f", {ratio(vs_reference)} the run's PyTorch baseline" if vs_reference else "")
        + (" (timed on a busy host)" if kernel.noisy else "")
    )


def print_vectorisation_report(kernel: KernelRecord) -> None:
    """On the CPU no verdict carries a static report: which loops the compiler vectorised is found
    by compiling the kernel's native source again (a second or two), as the Critic's review does."""
    from graph.resource_report import source_resource_report

    waiting = f"compiling {kernel.id} for its vectorisation report"
    with tempfile.TemporaryDirectory(prefix="ks-show-") as tmp, working(waiting):
        report = source_resource_report(kernel.source, "cpu", Path(tmp))
    if report:
        console.print(report, markup=False, highlight=False, soft_wrap=True)
    else:
        console.print("[dim]no vectorisation report: the kernel has no native C++ source[/dim]")


def compare_command(
    args: list[str] = typer.Argument(..., metavar="[RUN] A B", help="The run (default: the latest) and two kernel ids."),
    retime: bool = typer.Option(
        True, "--retime/--stored", help="Time both again now, one after the other (default), or show stored figures."
    ),
    budget: float | None = typer.Option(None, help="Seconds of timed repetitions per shape (default: the run's)."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """Two kernels side by side: per-shape times (re-measured now by default) and the diff of their sources."""
    from graph.run_data import source_diff

    run, rest = split_run_and_kernels(list(args), 2, runs_dir)
    if len(rest) != 2:
        fail("compare takes [RUN] A B: two kernel ids")
    with opened_run(run, runs_dir) as (handle, archive):
        a, b = (find_kernel(archive, k) for k in rest)
        if retime:
            problem_path = Path(archive.get_meta("problem_path"))
            seconds = budget or handle.config.sandbox.timing_budget_s
            times = retimed(problem_path, handle.config.target, seconds, a, b)
            title = f"re-timed now, {seconds:g} s per shape each (µs, median and p25–p75)"
        else:
            times = {k.id: stored_times(archive, k) for k in (a, b)}
            title = "as stored in the run (µs, median and p25–p75)"
        console.print(side_by_side(a, b, times, title))
        if retime:  # one after the other is quick; alternating rounds are what rank two close kernels
            console.print(
                f"[dim]timed one after the other; a speed-up with its 95% interval from alternating rounds: "
                f"kernel-scientist verify {handle.run_id} {b.id} --against {a.id}[/dim]",
                soft_wrap=True,
                highlight=False,
            )
        diff = source_diff(a, b)
        console.print(code_view(diff, "diff") if diff else "[dim]the two sources are identical[/dim]")


ShapeTimes = dict[str, tuple[float, float, float]]  # shape -> (median, p25, p75) in µs


def times_of(verdict: Verdict) -> ShapeTimes:
    return {b.shape: (b.median_us, b.p25_us, b.p75_us) for b in verdict.benchmarks}


def stored_times(archive: Archive, kernel: KernelRecord) -> ShapeTimes:
    from sandbox.verdict import Verdict

    verdict_json = archive.kernel_verdict(kernel.id)
    return times_of(Verdict.from_json(verdict_json)) if verdict_json and kernel.ok else {}


def retimed(problem_path: Path, target: str, budget_s: float, *kernels: KernelRecord) -> dict[str, ShapeTimes]:
    """Each kernel evaluated again, one after the other on this machine: figures taken minutes apart
    (as stored ones are) differ by the machine's drift, figures taken now differ by the kernels."""
    from sandbox.evaluator import EvalOptions, evaluate

    out: dict[str, ShapeTimes] = {}
    with tempfile.TemporaryDirectory(prefix="ks-compare-") as tmp, working(f"re-timing {' and '.join(k.id for k in kernels)}") as status:
        for kernel in kernels:
            path = Path(tmp) / f"{kernel.id}.py"
            path.write_text(kernel.source)
            status.update(f"timing {kernel.id}")
            verdict = evaluate(
                problem_path, path, EvalOptions(target=target, timing={"budget_s": budget_s}, time_reference=False)
            )
            if not verdict.passed:
                console.print(f"[yellow]{kernel.id} did not pass now:[/yellow] {verdict.status.value} {verdict.message}")
            out[kernel.id] = times_of(verdict) if verdict.passed else {}
    return out


def side_by_side(a: KernelRecord, b: KernelRecord, times: dict[str, ShapeTimes], title: str) -> Table:
    """One row per shape: each kernel's median with its interquartile range, and B's speed-up over A."""
    from rich.table import Table

    from graph.run_data import num, ratio

    table = Table(title=title, header_style="bold")
    table.add_column("shape")
    for k in (a, b):
        table.add_column(f"{k.id}", justify="right")
    table.add_column(f"{b.id} vs {a.id}", justify="right")
    ta, tb = times.get(a.id, {}), times.get(b.id, {})
    for shape in list(dict.fromkeys([*ta, *tb])):
        cells = [f"{num(t[0])} ({num(t[1])}–{num(t[2])})" if t else "-" for t in (ta.get(shape), tb.get(shape))]
        gain = ta[shape][0] / tb[shape][0] if shape in ta and shape in tb and tb[shape][0] else None
        table.add_row(shape, *cells, ratio(gain))
    return table
