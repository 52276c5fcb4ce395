"""`kernel-scientist report [RUN]` (HTML and PNG figures) and `kernel-scientist status [RUN]` (the terminal)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from graph.terminal import RUN_ARGUMENT_HELP, RUNS_DIR_HELP, console, fail, working

if TYPE_CHECKING:  # the commands import what they use when they run: --help stays instant
    from rich.table import Table

    from graph.archive import Archive
    from graph.run_handle import RunHandle


@contextmanager
def opened_run(run: str | None, runs_dir: Path | None) -> Iterator[tuple[RunHandle, Archive]]:
    """The run (None: the latest) and its archive, closed after; or exit 2 with the reason."""
    from graph.archive import Archive
    from graph.run_handle import RunError, open_run

    try:
        handle = open_run(run, runs_dir)
    except RunError as exc:
        fail(str(exc))
    archive = Archive(handle.archive_path)
    try:
        yield handle, archive
    finally:
        archive.close()


def report_command(
    run: str | None = typer.Argument(None, help=RUN_ARGUMENT_HELP),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output folder (default: <run>/report)."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """Write a self-contained HTML report of a run and its figures as PNG files."""
    from graph.report import write_report  # matplotlib loads only for this command

    with opened_run(run, runs_dir) as (handle, archive), working("drawing the figures"):
        files = write_report(archive, handle.run_id, handle.config.target, out or handle.run_dir / "report")
    console.print(f"report written to {files.html}")
    console.print(f"figures: {', '.join(str(p) for p in files.figures.values())}")


def status_command(
    run: str | None = typer.Argument(None, help=RUN_ARGUMENT_HELP),
    limit: int = typer.Option(10, "--limit", "-n", min=1, help="Kernels in the leaderboard."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """A run's state and a compact leaderboard, at any time (also while it runs)."""
    from graph import control
    from graph.run_data import baselines, headline, ratio

    with opened_run(run, runs_dir) as (handle, archive):
        state = control.run_status(archive)
        top = headline(archive)
        best = top.best
        base = baselines(archive)
        spend = archive.spend()
        head = f"[bold]{handle.run_id}[/bold]  {state.status}"
        if state.alive:
            head += f" (process {state.pid})"
        if state.control != "run":
            head += f"  [yellow]{state.control} requested[/yellow]"
        head += f"  ·  generation {state.generations_done} of {state.generation_budget}"
        if state.approval:
            head += "  ·  approval mode"
        console.print(head)
        if best is not None:
            line = top.best_text()
            if top.seed_text():
                line += f", {top.seed_text()}"
            if base.vs_reference(best):
                line += f", {ratio(base.vs_reference(best))} PyTorch"
            if base.sol_geomean_us and best.geomean_us:
                line += f", {100 * base.sol_geomean_us / best.geomean_us:.1f}% of the speed of light"
            console.print(line)
        failed = f" ({spend.failed} failed)" if spend.failed else ""
        console.print(f"{spend.calls} LLM calls{failed}, {spend.tokens} tokens, ${spend.cost_usd:.4f}")
        if state.stop_reason:
            console.print(f"stopped: {state.stop_reason}")
        pending = control.pending_plans(archive)
        if pending:
            titles = "; ".join(f"{p['id']} {p['plan'].get('title', '')}" for p in pending["plans"])
            console.print(f"[yellow]generation {pending['generation']} awaits approval:[/yellow] {titles}")
        console.print(compact_leaderboard(archive, limit))


def compact_leaderboard(archive: Archive, limit: int = 10) -> Table:
    """The leaderboard in few columns: the numbers never shrink, the plan takes what is left."""
    from rich import box
    from rich.table import Table

    from graph.run_data import VERIFIED_NOTE, baselines, num_interval, plan_title, ratio, seed_ratio_text, seed_ratios

    over_seed = seed_ratios(archive)
    base = baselines(archive)
    # As wide as a terminal (the plan takes what is left); off one, as wide as its contents.
    table = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False, expand=console.is_terminal,
                  caption=VERIFIED_NOTE, caption_justify="left")
    for name in ("#", "kernel", "gen", "µs [95%]", "vs seed", "vs PyTorch"):
        table.add_column(name, no_wrap=True, justify="right" if name not in ("kernel",) else "left")
    table.add_column("plan", no_wrap=True, overflow="ellipsis", ratio=1, min_width=12)
    for rank, k in archive.ranked(limit):
        table.add_row(
            str(rank), k.id, str(k.generation), num_interval(k.geomean_us, k.geomean_ci_us) + (" busy" if k.noisy else ""),
            seed_ratio_text(*over_seed(k)), ratio(base.vs_reference(k)), plan_title(k)
        )
    return table
