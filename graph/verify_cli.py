"""`kernel-scientist verify [RUN] [KERNEL] [--against BASE]`: a kernel timed side by side with another.

The command a verified win records (graph/verify.py): a fresh judge, each kernel in a runner of its
own, rounds alternating on the same fresh inputs; the speed-up with its 95% interval per shape and
over the shapes, and whether it clears the noise. The measurement is kept in the run's archive.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from graph.report_cli import opened_run
from graph.show_cli import find_kernel, split_run_and_kernels
from graph.terminal import RUNS_DIR_HELP, console, fail, working

if TYPE_CHECKING:
    from rich.table import Table

    from graph.verify import Verification


def verify_command(
    args: list[str] = typer.Argument(None, metavar="[RUN] [KERNEL]",
                                     help="The run (default: the latest) and a kernel (default: its best)."),
    against: str | None = typer.Option(None, "--against", help="The base kernel's id (default: the run's seed)."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """Time a kernel beside another, interleaved on the same inputs: the speed-up with its interval."""
    from graph import verify
    from graph.config import SandboxSettings
    from graph.evaluation import RunEvaluator

    run, rest = split_run_and_kernels(list(args or []), 1, runs_dir)
    with opened_run(run, runs_dir) as (handle, archive):
        kernel = find_kernel(archive, rest[0] if rest else None)
        base = find_kernel(archive, against) if against else archive.seed()
        if base is None:
            fail("this run has no seed to compare with: name one with --against")
        if base.id == kernel.id:
            fail(f"{kernel.id} is the base itself: name another kernel, or another base with --against")
        settings: SandboxSettings = handle.config.sandbox
        evaluator = RunEvaluator.for_run(archive, handle.run_dir, Path(archive.get_meta("problem_path")),
                                         handle.config.target, settings)
        try:
            checks = []
            for trial in range(verify.TRIALS):
                with working(f"timing {kernel.id} beside {base.id} ({trial + 1} of {verify.TRIALS})"):
                    checks.append(verify.from_verdict(evaluator.verify(kernel, base), kernel, base, str(handle.run_dir)))
        finally:
            evaluator.close()
        check = verify.combine(checks)
        verify.record(archive, check)
    console.print(table_of(check))
    console.print(check.describe())
    if check.reason:
        console.print(f"[yellow]{check.reason}[/yellow]")


def table_of(check: Verification) -> Table:
    """One row per shape: both medians, the speed-up base/kernel and its interval."""
    from rich.table import Table

    from graph.run_data import num

    table = Table(title=f"{check.kernel_id} beside {check.base_id} (µs; speed-up = base / kernel, 95% interval)",
                  header_style="bold")
    for column in ("shape", check.kernel_id, check.base_id, "speed-up", "interval"):
        table.add_column(column, justify="left" if column == "shape" else "right")
    for shape in check.shapes:
        interval = f"{shape.ratio_ci[0]:.3f}–{shape.ratio_ci[1]:.3f}" if shape.ratio_ci else "-"
        table.add_row(shape.shape, num(shape.candidate_us), num(shape.base_us),
                      f"{shape.ratio:.3f}×" if shape.ratio else "-", interval)
    return table
