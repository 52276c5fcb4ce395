"""`kernel-scientist run` and `kernel-scientist export`."""

from __future__ import annotations

import json
import logging
import signal
import sys
from pathlib import Path

import typer
from rich.console import Console

from graph.archive import Archive
from graph.config import Budgets, ConfigError, RunConfig, SandboxSettings, load_llm_settings
from graph.control import extend_run, set_approval
from graph.export import ExportError, export_kernel
from graph.progress import LiveProgress, leaderboard_table
from graph.runs import RunError, build_context, create_run, execute, open_run, replay_chat_models, run_summary

log = logging.getLogger(__name__)
console = Console()


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def run_command(
    problem: str | None = typer.Argument(None, help="Bundled problem name, GPU MODE directory or KernelBench file."),
    target: str = typer.Option("cpu", "--target", "-t", help="cpu, cuda, or hip (a ROCm host)."),
    generations: int = typer.Option(10, "--generations", "-g", min=1, help="Generations at most."),
    parallel: int = typer.Option(3, "--parallel", "-k", min=1, max=16, help="Experiments per generation."),
    resume: str | None = typer.Option(None, "--resume", help="Resume this run (id or directory)."),
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
    runs_dir: Path | None = typer.Option(None, help="Where runs live (default $KS_RUNS_DIR or ./runs)."),
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
    replay_models = None
    try:
        if more is not None and resume is None:
            raise _fail("--more goes with --resume RUN")
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
                raise _fail("give a PROBLEM, or --resume RUN")
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
                ),
                llm=llm,
                knowledge=knowledge,
                use_knowledge=False if no_kb else None,
                directives=directive,
            )
            handle = create_run(config, runs_dir)
    except (RunError, ConfigError, ValueError) as exc:
        raise _fail(str(exc)) from exc

    archive = Archive(handle.archive_path)
    if approve:
        set_approval(archive, True)
    console.print(f"run [bold]{handle.run_id}[/bold] in {handle.run_dir}")
    if not handle.config.llm.configured:
        console.print(
            "[yellow]no LLM configured:[/yellow] only the Tuner proposes candidates "
            "(set --model/--base-url, $KS_LLM_MODEL or --llm-config for the full scientist)"
        )
    # A SIGTERM (a scheduler, `kill`) ends the run like Ctrl-C: the checkpoints hold its state.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    progress = None if plain or not console.is_terminal else LiveProgress(archive, console, handle.run_id)
    try:
        ctx = build_context(handle, archive, progress=progress, chat_models=replay_models)
        if progress is not None:
            with progress:
                final = execute(handle, ctx)
        else:
            final = execute(handle, ctx)
    except KeyboardInterrupt:
        console.print(f"\n[yellow]interrupted.[/yellow] Resume with: kernel-scientist run --resume {handle.run_id}")
        raise typer.Exit(130) from None
    except Exception as exc:
        log.exception("run failed")
        raise _fail(f"run {handle.run_id} failed: {exc}. Resume with --resume {handle.run_id}", 1) from exc
    console.print(leaderboard_table(archive, width=console.width))
    summary = run_summary(archive)
    console.print(f"stopped: {final.get('stop_reason')}")
    if summary["best"]:
        gain = summary["speedup_over_seed"]
        console.print(
            f"best kernel {summary['best']}: {summary['best_geomean_us']:.4g} µs"
            + (f", {gain:.2f}x the seed" if gain else "")
            + f"; export with: kernel-scientist export {handle.run_id}"
        )
    (handle.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    archive.close()


def export_command(
    run: str = typer.Argument(..., help="Run id or directory."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output file (default: <run>/submission.py)."),
    kernel: str | None = typer.Option(None, help="Kernel id (default: the best)."),
    leaderboard: str | None = typer.Option(None, help="Leaderboard name for the #!POPCORN line."),
    gpu: str | None = typer.Option(None, help="GPU for the #!POPCORN line (default from the target: MI300, H100)."),
    runs_dir: Path | None = typer.Option(None, help="Where runs live (default $KS_RUNS_DIR or ./runs)."),
) -> None:
    """Write a run's best kernel as a submission file with its #!POPCORN header lines."""
    try:
        handle = open_run(run, runs_dir)
        archive = Archive(handle.archive_path)
        out = out or handle.run_dir / "submission.py"
        chosen = export_kernel(archive, out, handle.config.target, kernel, leaderboard, gpu)
    except (RunError, ExportError) as exc:
        raise _fail(str(exc)) from exc
    console.print(f"kernel {chosen.id} ({chosen.geomean_us:.4g} µs) written to {out}")
    if handle.config.target == "cpu":
        print(
            "note: CPU kernels build through this project's sandbox.native; they are not competition entries.",
            file=sys.stderr,
        )
