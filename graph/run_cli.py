"""`kernel-scientist run` and `kernel-scientist export`."""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from graph.terminal import RUN_ARGUMENT_HELP, RUNS_DIR_HELP, console, fail, working

if TYPE_CHECKING:  # the commands import what they use when they run: --help stays instant
    from graph.archive import Archive, KernelRecord
    from graph.config import RunConfig

log = logging.getLogger(__name__)


def kept_on_resume(archive: Archive) -> str:
    """What a resumed run starts from, so the user sees that nothing was lost."""
    from graph.run_data import num

    best = archive.run_best()
    done = max((g["generation"] for g in archive.generations()), default=0)
    line = f"resuming with {len(archive.kernels())} kernels, {archive.evaluation_count()} evaluations"
    line += f" and {done} finished generations kept"
    if best is not None:
        line += f"; best {best.id} at {num(best.geomean_us)} µs"
    return line


# What `run --resume` still reads from its command line; every other option is the run's own, in run.json.
RESUME_OPTIONS = {"resume", "more", "directive", "plain", "runs_dir", "approve"}


def ignored_on_resume(ctx: typer.Context) -> list[str]:
    """The options given on the command line that a resume does not apply (its configuration is the
    run's): named, so that `--resume RUN -g 5` does not silently run the old budget."""
    return [
        param.opts[0] if param.param_type_name == "option" else (param.name or "").upper()
        for param in ctx.command.params
        if param.name not in RESUME_OPTIONS and given_on_command_line(ctx, param.name or "")
    ]


def given_on_command_line(ctx: typer.Context, name: str) -> bool:
    """By the source's name: typer may bring its own copy of click, whose enum is not click's."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def resume_notes(ctx: typer.Context, archive: Archive, more: int | None) -> list[str]:
    """What a resume will not do that its command line may have asked for, and a finished run's way on."""
    from graph.control import run_status

    notes = []
    ignored = ignored_on_resume(ctx)
    if ignored:
        notes.append(f"{', '.join(ignored)} ignored: a resumed run keeps its configuration (more generations: --more N)")
    state = run_status(archive)
    if more is None and state.status == "finished":
        notes.append(f"this run had finished ({state.stop_reason}); --more N runs N more generations")
    return notes


def run_command(
    command: typer.Context,
    problem: str | None = typer.Argument(None, help="Bundled problem name, GPU MODE directory or KernelBench file."),
    target: str = typer.Option("cpu", "--target", "-t", help="cpu, cuda, or hip (a ROCm host)."),
    generations: int = typer.Option(10, "--generations", "-g", min=1, help="Generations at most."),
    parallel: int = typer.Option(3, "--parallel", "-k", min=1, max=16, help="Experiments per generation."),
    resume: str | None = typer.Option(
        None, "--resume", help="Resume this run (id, directory, or latest: the run that changed last)."
    ),
    variant: str | None = typer.Option(None, help="Seed variant, e.g. triton."),
    seed: Path | None = typer.Option(None, help="Starting submission; default: the problem's seed."),
    llm_config: Path | None = typer.Option(None, "--llm-config", help="YAML with the roles' endpoints and models."),
    model: str | None = typer.Option(None, help="Model for every role (or $KS_LLM_MODEL)."),
    base_url: str | None = typer.Option(None, help="OpenAI-compatible endpoint (or $KS_LLM_BASE_URL)."),
    wall_time: float | None = typer.Option(None, help="Stop after this many seconds of running."),
    max_tokens: int | None = typer.Option(None, help="Stop once the LLM calls have used this many tokens."),
    max_cost: float | None = typer.Option(None, help="Stop once the LLM calls have cost this many USD."),
    patience: int = typer.Option(3, min=1, help="Stop after this many generations without a new best."),
    budget: float = typer.Option(1.0, help="Seconds of timed repetitions per benchmark shape."),
    cores: str | None = typer.Option(None, help="Pin the judges and kernels to these CPU cores, e.g. 0-3."),
    gpus: str | None = typer.Option(None, help="GPU indices to evaluate on, e.g. 0,1 (default: every visible GPU)."),
    cluster: str | None = typer.Option(
        None, "--cluster", help="Evaluate on Ray: ray://HOST:PORT, auto (the local `ray start`), or local."
    ),
    ray_resource: list[str] = typer.Option(
        [], "--ray-resource", help="A Ray resource each evaluation needs, e.g. gfx942 or sm_90 (repeatable)."
    ),
    directive: list[str] = typer.Option([], "--directive", "-d", help="A goal for the Selector and Researcher."),
    knowledge: str | None = typer.Option(None, "--kb", help="Knowledge base directory (default $KS_KB_DIR)."),
    no_kb: bool = typer.Option(False, "--no-kb", help="Do not consult the knowledge base."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
    plain: bool = typer.Option(False, "--plain", help="Log lines instead of the live panel."),
    more: int | None = typer.Option(
        None, "--more", min=1, help="With --resume: allow this many more generations (a finished run too)."
    ),
    approve: bool = typer.Option(
        False, "--approve", help="Approval mode: wait for a review of each generation's plans (kernel-scientist chat)."
    ),
    replay: str | None = typer.Option(
        None, "--replay", help="A new run with RUN's configuration, every LLM reply read from RUN's archive."
    ),
) -> None:
    """Optimise a kernel: generations of select, research, write, review, evaluate."""
    from graph.archive import Archive
    from graph.config import Budgets, ConfigError, RunConfig, SandboxSettings, load_llm_settings
    from graph.control import extend_run, set_approval
    from graph.preflight import PreflightError, check_submission, check_target, directive_notes
    from graph.progress import LineProgress, LiveProgress, leaderboard_table
    from graph.run_data import num_interval
    from graph.run_handle import RunError, open_run
    from graph.runs import build_context, create_run, execute, replay_chat_models, run_summary

    replay_models = None
    try:
        if more is not None and resume is None:
            fail("--more goes with --resume RUN")
        if replay is not None:
            source = open_run(replay, runs_dir)
            recorded = Archive(source.archive_path)
            replay_models = replay_chat_models(recorded, source.config)
            handle = create_run(source.config.model_copy(update={"directives": recorded.directives()}), runs_dir)
        elif resume is not None:
            handle = open_run(resume, runs_dir)
            for text in directive:
                Archive(handle.archive_path).add_directive(text)
            if more is not None:
                handle = extend_run(handle, more)
        else:
            if problem is None:
                fail("give a PROBLEM, or --resume RUN")
            check_target(target)
            llm = load_llm_settings(llm_config, model, base_url)
            config = RunConfig(
                problem=problem,
                target=target,
                variant=variant,
                seed=str(seed) if seed else None,
                parallel=parallel,
                budgets=Budgets(
                    generations=generations,
                    wall_time_s=wall_time,
                    max_tokens=max_tokens,
                    max_cost_usd=max_cost,
                    patience=patience,
                ),
                sandbox=SandboxSettings(
                    timing_budget_s=budget,
                    devices=[int(g) for g in gpus.split(",") if g.strip()] if gpus else None,
                    cluster=cluster,
                    cluster_resources={name: 1.0 for name in ray_resource},
                    cores=cores,
                ),
                llm=llm,
                knowledge=knowledge,
                use_knowledge=False if no_kb else None,
                directives=directive,
            )
            preflight(config)
            if seed is not None and seed.is_file():
                check_submission(seed, "ModelNew" if problem.endswith(".py") else "custom_kernel")
            handle = create_run(config, runs_dir)
        if resume is not None:
            preflight(handle.config)
    except (RunError, ConfigError, PreflightError, ValueError) as exc:
        fail(str(exc))

    archive = Archive(handle.archive_path)
    if approve:
        set_approval(archive, True)
    console.print(f"run [bold]{handle.run_id}[/bold] in {handle.run_dir}", soft_wrap=True, highlight=False)
    if resume is not None:
        console.print(kept_on_resume(archive), highlight=False)
        for note in resume_notes(command, archive, more):
            console.print(f"[yellow]note:[/yellow] {note}", highlight=False, soft_wrap=True)
    if not handle.config.llm.configured:
        console.print(
            "[yellow]no LLM configured:[/yellow] only the Tuner proposes candidates "
            "(set --model/--base-url, $KS_LLM_MODEL or --llm-config for the full scientist)",
            soft_wrap=True,
        )
    for note in directive_notes(handle.config.model_copy(update={"directives": archive.directives()})):
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False, soft_wrap=True)
    # A SIGTERM (a scheduler, `kill`) ends the run like Ctrl-C: the checkpoints hold its state.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    live = not plain and console.is_terminal
    progress = LiveProgress(archive, console, handle.run_id) if live else LineProgress(console)
    try:
        ctx = build_context(handle, archive, progress=progress, chat_models=replay_models)
        if isinstance(progress, LiveProgress):
            with progress:
                final = execute(handle, ctx)
        else:
            final = execute(handle, ctx)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted.[/yellow] Resume with: kernel-scientist run --resume {handle.run_id}")
        raise typer.Exit(130) from None
    except Exception as exc:
        log.exception("run failed")
        fail(f"run {handle.run_id} failed: {exc}. Resume with --resume {handle.run_id}", 1)
    summary = run_summary(archive)
    (handle.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    seed_kernel = archive.seed()
    if seed_kernel is not None and not seed_kernel.ok:
        archive.close()
        refuse_failing_seed(handle.run_id, handle.config, seed_kernel)
    console.print(leaderboard_table(archive, width=console.width))
    console.print(f"stopped: {final.get('stop_reason')}")
    spend = archive.spend()
    if spend.failed:
        console.print(
            f"[yellow]{spend.failed} of {spend.calls} LLM calls failed[/yellow]"
            + (": every candidate came from the Tuner alone" if spend.failed == spend.calls else "")
            + f" (kernel-scientist chat {handle.run_id}, /spend, says which roles)",
            soft_wrap=True,
        )
    if summary["best"]:
        from graph.run_data import headline

        over_seed = headline(archive).seed_text()
        console.print(
            f"best kernel {summary['best']}: {num_interval(summary['best_geomean_us'], summary['best_geomean_ci_us'], 'µs')}"
            + (f", {over_seed}" if over_seed else "")
            + f"; look at it with: kernel-scientist show {handle.run_id}; export with: kernel-scientist export {handle.run_id}",
            soft_wrap=True,
        )
    archive.close()


_SEED_DETAIL_LINES = 12  # of the seed's message under its one-line failure: diagnostics, a test, a log tail


def refuse_failing_seed(run_id: str, config: RunConfig, seed: KernelRecord) -> NoReturn:
    """A run whose seed does not pass has nothing to improve on: exit 2, as for the other runs that
    cannot work, with the seed's failure in one line (its diagnostics, a failed test or the log's
    tail below it), instead of an empty leaderboard and exit 0."""
    from graph.nodes import seed_failure

    first, _, rest = seed_failure(seed, config.seed).partition("\n")
    details = [line for line in rest.splitlines() if line.strip()][:_SEED_DETAIL_LINES]
    details.append(f"its verdict: kernel-scientist show {run_id} {seed.id}")
    fail(first, details="\n".join(details))


def preflight(config: RunConfig) -> None:
    """Refuse a run that cannot work (no GPU for its target, an LLM endpoint that does not answer)."""
    from graph.preflight import check_llm, check_target

    check_target(config.target)
    if config.llm.configured:
        with working("asking the LLM endpoint a first small question"):
            check_llm(config.llm)


def export_command(
    run: str | None = typer.Argument(None, help=RUN_ARGUMENT_HELP),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output file (default: <run>/submission.py)."),
    kernel: str | None = typer.Option(None, help="Kernel id (default: the best)."),
    leaderboard: str | None = typer.Option(None, help="Leaderboard name for the #!POPCORN line."),
    gpu: str | None = typer.Option(None, help="GPU for the #!POPCORN line (default from the target: MI300, H100)."),
    runs_dir: Path | None = typer.Option(None, help=RUNS_DIR_HELP),
) -> None:
    """Write a run's best kernel as a submission file with its #!POPCORN header lines."""
    from graph.archive import Archive
    from graph.export import ExportError, export_kernel
    from graph.run_data import headline, num_interval
    from graph.run_handle import RunError, open_run

    try:
        handle = open_run(run, runs_dir)
        archive = Archive(handle.archive_path)
        out = out or handle.run_dir / "submission.py"
        chosen = export_kernel(archive, out, handle.config.target, kernel, leaderboard, gpu)
    except (RunError, ExportError) as exc:
        fail(str(exc))
    console.print(f"kernel {chosen.id} ({num_interval(chosen.geomean_us, chosen.geomean_ci_us, 'µs')}) written to {out}")
    top = headline(archive)
    if top.best is not None and top.best.id == chosen.id and top.seed_text():
        console.print(f"the run's best: {top.seed_text()}")
    if handle.config.target == "cpu":
        print(
            "note: CPU kernels build through this project's sandbox.native; they are not competition entries.",
            file=sys.stderr,
        )
