"""The `kernel-scientist` command.

Every command answers at once: this module and the command modules it registers import no torch,
LangChain, LangGraph or Chroma; each command imports what it needs when it runs
(tests/test_cli.py holds the line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from graph.chat_cli import chat_command
from graph.report_cli import report_command, status_command
from graph.run_cli import export_command, run_command
from graph.show_cli import compare_command, show_command
from graph.terminal import console, fail, setup_logging, working
from graph.verify_cli import verify_command
from knowledge.cli import kb_app

app = typer.Typer(
    help="Kernel Scientist: evolve fast, correct GPU kernels with LLM agents and measured feedback.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(kb_app, name="kb")
app.command("run")(run_command)
app.command("export")(export_command)
app.command("chat")(chat_command)
app.command("report")(report_command)
app.command("status")(status_command)
app.command("show")(show_command)
app.command("compare")(compare_command)
app.command("verify")(verify_command)


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")) -> None:
    setup_logging(verbose)


class EvalProgress:
    """The evaluation's phases as they happen: a spinner on a terminal, a line each otherwise.
    Names each shape as it starts, counted against the problem's lists ("check shape 3 of 7"), so a
    kernel that hangs on a shape shows that shape for the minutes until the phase's limit, not the
    one before it."""

    def __init__(self, status: Any, tests: int, benchmarks: int) -> None:
        self.status = status
        self.totals = {"check": tests, "time": benchmarks}
        self.started = {"check": 0, "time": 0}
        self.phase = ""

    def __call__(self, event: dict[str, Any]) -> None:
        if "phase" in event:
            self.phase = str(event["phase"])
            self.say(f"{self.phase}…")
        elif "shape_started" in event and self.phase in self.started:
            self.started[self.phase] += 1
            count, total = self.started[self.phase], self.totals[self.phase]
            of = f" of {total}" if count <= total else ""  # beyond the list: the adversarial values' cases
            self.say(f"{self.phase} shape {count}{of}: {event['shape_started']}")

    def say(self, text: str) -> None:
        if console.is_terminal:
            self.status.update(text)
        else:
            console.print(text, markup=False, highlight=False)


@app.command("eval")
def eval_command(
    problem: str = typer.Argument(
        ..., help="Bundled problem name, GPU MODE problem directory, or KernelBench .py file."
    ),
    submission: Path | None = typer.Argument(None, help="Submission file; default: the problem's seed for the target."),
    target: str = typer.Option("cpu", "--target", "-t", help="cpu, cuda, or hip (a ROCm host)."),
    variant: str | None = typer.Option(None, help="Seed variant when SUBMISSION is omitted (e.g. triton)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the verdict as JSON here."),
    check_only: bool = typer.Option(False, "--check-only", help="Check correctness, skip timing."),
    budget: float = typer.Option(2.0, help="Seconds of timed repetitions per benchmark shape."),
    no_reference: bool = typer.Option(False, "--no-reference", help="Do not time the reference (no speed-up)."),
    build_limit: float = typer.Option(600.0, help="Wall-clock limit of the build phase, seconds."),
    check_limit: float = typer.Option(300.0, help="Wall-clock limit of the check phase, seconds."),
    time_limit: float = typer.Option(600.0, help="Wall-clock limit of the timing phase, seconds."),
    gpu: int | None = typer.Option(None, help="GPU index to use (default: the first visible)."),
    profiler: str = typer.Option("auto", help="hip target: 'auto' times under rocprofv3 where installed; 'off'."),
    cores: str | None = typer.Option(None, help="Pin the judge and the kernel to these CPU cores, e.g. 0-3."),
) -> None:
    """Build, check and time one submission, and print its verdict."""
    from graph.config import TARGETS, unknown_target
    from graph.preflight import PreflightError, check_submission
    from sandbox.evaluator import EvalOptions, PhaseLimits, evaluate
    from sandbox.problem import ProblemError, load_problem
    from sandbox.report import render_verdict

    if profiler not in ("auto", "off"):
        fail(f"--profiler must be auto or off, not {profiler!r}")
    from sandbox.envinfo import parse_cores

    try:
        pinned = parse_cores(cores) if cores else None
    except ValueError as exc:
        fail(f"--cores: {exc}")
    if target not in TARGETS:
        fail(unknown_target(target))
    if target != "cpu":
        from graph.preflight import check_target

        try:
            check_target(target)  # a GPU target without its GPU: one line that points to the doctor
        except PreflightError as exc:
            fail(str(exc))
    try:
        spec = load_problem(problem, target)
        if submission is None:
            submission = spec.seed_for(target, variant)
            console.print(f"[dim]no submission given: using the {target} seed {submission}[/dim]")
    except ProblemError as exc:
        fail(str(exc))
    if not submission.is_file():
        fail(f"submission not found: {submission}")
    try:
        check_submission(submission, "ModelNew" if spec.kind == "kernelbench" else "custom_kernel")
    except PreflightError as exc:
        fail(str(exc))
    options = EvalOptions(
        target=target,
        mode="check" if check_only else "full",
        limits=PhaseLimits(build=build_limit, check=check_limit, time=time_limit),
        timing={"budget_s": budget},
        time_reference=not no_reference,
        gpu=gpu,
        profiler=profiler,
        cores=pinned,
    )
    with working("starting the judge") as status:
        progress = EvalProgress(status, len(spec.tests), 0 if check_only else len(spec.benchmarks))
        try:
            verdict = evaluate(spec.path, submission, options, on_event=progress)
        except ValueError as exc:
            fail(str(exc))
    render_verdict(verdict, console)
    if verdict.status.value in ("harness_error", "build_error") and target != "cpu":
        console.print(f"[dim]`kernel-scientist doctor --target {target}` says what this machine has and lacks for it[/dim]")
    if json_out is not None:
        json_out.write_text(verdict.to_json())
        console.print(f"[dim]verdict written to {json_out}[/dim]")
    raise typer.Exit(0 if verdict.passed else 1)


@app.command("doctor")
def doctor_command(
    target: str | None = typer.Option(None, "--target", "-t", help="cpu, cuda or hip; default: all three."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the findings as JSON here."),
) -> None:
    """What this machine can do for each target, what is missing, and the command that fixes it."""
    from graph.doctor_cli import doctor

    raise typer.Exit(doctor(target, json_out, console))


@app.command("problems")
def problems_command() -> None:
    """List the bundled problems and their seeds."""
    from rich.table import Table

    from sandbox.problem import bundled_problems, load_problem

    table = Table(title="Bundled problems")
    for col in ("name", "targets", "seeds", "tests", "benchmarks"):
        table.add_column(col, no_wrap=col == "name")  # the name is what `run` and `eval` take: never cut
    for name, path in bundled_problems().items():
        spec = load_problem(path)
        table.add_row(
            name,
            ", ".join(spec.targets),
            ", ".join(sorted(spec.seeds)),
            str(len(spec.tests)),
            str(len(spec.benchmarks)),
        )
    console.print(table)


if __name__ == "__main__":
    app()
