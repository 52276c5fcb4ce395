"""`kernel-scientist kb ...`: ingest, refresh, search, stats and remove, as a Typer sub-app.

graph/cli.py mounts it with `app.add_typer(kb_app, name="kb")`; `python -m knowledge.cli`
runs it alone. Heavy imports (Chroma, the model) happen inside the commands, so mounting
it costs the main CLI nothing.
"""

from __future__ import annotations

import atexit
import gc
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from graph.terminal import make_console

if TYPE_CHECKING:
    from collections.abc import Callable

    from knowledge.base import KnowledgeBase, ProgressCallback
    from knowledge.models import FileResult, IngestReport

kb_app = typer.Typer(
    help="The knowledge base: GPU literature and experiment findings for the Researcher.",
    no_args_is_help=True,
    add_completion=False,
)
console = make_console()
err = make_console(stderr=True)

_freeze_at_exit = False

STORE_HELP = (
    "Store folder (default: $KS_KB_DIR, else $KS_WORKSPACE/knowledge or ~/.kernel-scientist/knowledge)."
)


def _open(store: Path | None) -> KnowledgeBase:
    from knowledge.base import KnowledgeBase
    from knowledge.primer import ensure_primer

    # torch and the model leave about a million objects; the collector's last pass over them
    # at interpreter exit takes a second. Freezing them at exit (not before: a long-lived
    # caller's garbage must stay collectable) skips that pass.
    global _freeze_at_exit
    if not _freeze_at_exit:
        atexit.register(gc.freeze)
        _freeze_at_exit = True
    kb = KnowledgeBase(store, primer=False)
    with console.status("checking the primer (loaded into a new store on first use)"):
        ensure_primer(kb)
    return kb


def _snippet(text: str, limit: int = 300) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@kb_app.command("ingest")
def ingest_command(
    paths: list[Path] = typer.Argument(
        ..., help="Files and folders (Markdown, RST, HTML, PDF, text, source code)."
    ),
    target: str | None = typer.Option(
        None,
        "--target",
        "-t",
        help="Tag as amd, nvidia, cpu, 'amd,nvidia' or generic (default: inferred per document).",
    ),
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Add documents; unchanged files are skipped, changed ones replaced. Exit 1 if any file failed."""
    from knowledge.targets import parse_targets

    try:
        parse_targets(target)
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    kb = _open(store)
    _ingest_with_progress(kb, lambda on_progress: kb.ingest(paths, target=target, on_progress=on_progress), as_json)


@kb_app.command("refresh")
def refresh_command(
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Ingest every source again from its file: changed files are replaced, and documents cut or tagged
    by an older version (a store from before the cpu tag) are cut and tagged anew. Exit 1 if a file
    failed or no longer exists."""
    kb = _open(store)
    _ingest_with_progress(kb, kb.refresh, as_json)


def _ingest_with_progress(kb: KnowledgeBase, work: Callable[[ProgressCallback], IngestReport], as_json: bool) -> None:
    """Run an ingestion with a progress bar (a line per file where no terminal shows the bar), then
    print its report; exit 1 if any file failed."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not err.is_terminal and not as_json:  # the first file's line comes after the model has loaded
        err.print(f"ingesting into {kb.path} (the embedding model loads first: a few seconds)", markup=False, highlight=False)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True, disable=as_json) as progress:
        task = progress.add_task("ingesting", total=None)

        def on_progress(done: int, total: int, result: FileResult) -> None:
            progress.update(
                task, total=total, completed=done, description=f"{Path(result.source).name[:40]:40}"
            )
            if not err.is_terminal and not as_json:  # a log or a pipe sees no bar: a line per file
                err.print(f"{done}/{total} {result.status} {result.source}", markup=False, highlight=False)

        report = work(on_progress)
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        console.print(
            f"{report.count('added')} added, {report.count('updated')} updated, "
            f"{report.count('unchanged')} unchanged, "
            f"[{'red' if report.failed else 'green'}]{report.count('failed')} failed[/] "
            f"({report.chunks} chunks written) in {report.seconds:.1f} s; store {kb.path}",
            soft_wrap=True,
        )
        if report.skipped:
            console.print(f"[dim]{len(report.skipped)} files of unsupported types skipped[/dim]")
        for failed in report.failed:
            console.print(
                f"[red]failed[/red] {failed.source}: {failed.error}", soft_wrap=True, highlight=False
            )
    if report.failed:
        raise typer.Exit(1)


@kb_app.command("search")
def search_command(
    query: str = typer.Argument(..., help="What to look for."),
    target: str | None = typer.Option(
        None, "--target", "-t", help="amd, nvidia, cpu or generic (that target + generic)."
    ),
    k: int = typer.Option(5, "-k", help="Number of results."),
    mode: str = typer.Option("hybrid", help="hybrid, dense or keyword."),
    findings: bool = typer.Option(
        False, "--findings", help="Also search the findings of earlier experiments."
    ),
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
) -> None:
    """Search the literature; each result names its source and section for citation."""
    if mode not in ("hybrid", "dense", "keyword"):
        err.print(f"[red]error:[/red] unknown mode {mode!r}")
        raise typer.Exit(2)
    kb = _open(store)
    try:
        hits = kb.search(query, k=k, target=target, mode=mode)  # type: ignore[arg-type]
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    found = kb.search_findings(query, k=k) if findings else []
    if as_json:
        payload = {"hits": [h.model_dump() for h in hits], "findings": [f.model_dump() for f in found]}
        console.print_json(json.dumps(payload))
        return
    if not hits:
        console.print("no results")
    for i, hit in enumerate(hits, 1):
        console.print(
            f"[bold]{i}.[/bold] [cyan]{hit.citation()}[/cyan] [dim]({','.join(hit.targets)}; "
            f"{hit.score:.4f})[/dim]",
            highlight=False,
            soft_wrap=True,
        )
        console.print(f"   {_snippet(hit.text)}", highlight=False, markup=False)
    for i, fh in enumerate(found, 1):
        f = fh.finding
        console.print(
            f"[bold]F{i}.[/bold] [magenta]{f.problem} / {f.kernel_id} on {f.target}[/magenta] "
            f"measured {f.measured_speedup if f.measured_speedup is not None else '-'}x",
            highlight=False,
        )
        console.print(f"   {_snippet(f.hypothesis + ' - ' + f.explanation)}", highlight=False, markup=False)


@kb_app.command("stats")
def stats_command(
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print statistics as JSON."),
) -> None:
    """What the store holds: sources, chunks, kinds, targets and findings."""
    from knowledge.paths import default_store_path
    from knowledge.stats import read_stats

    # Read from the store's files where they allow it: opening Chroma costs seconds, the figures none.
    stats = read_stats((store or default_store_path()).expanduser().resolve()) or _open(store).stats()
    if as_json:
        console.print_json(stats.model_dump_json())
        return
    console.print(
        f"store {stats.path}: {len(stats.sources)} sources, {stats.chunks} chunks, "
        f"{stats.findings} findings; embeddings {stats.embedding_model}",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        "by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.by_kind.items())), highlight=False
    )
    console.print(
        "by target: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.by_target.items())), highlight=False
    )
    table = Table("source", "kind", "targets", "chunks", "ingested")
    table.columns[0].overflow = "fold"
    for s in stats.sources:
        table.add_row(s.source, s.kind, ",".join(s.targets), str(s.chunks), s.ingested_at)
    console.print(table)


@kb_app.command("remove")
def remove_command(
    sources: list[str] = typer.Argument(
        None, help="Sources to delete: a path, a folder, or a name from `kb stats`."
    ),
    missing: bool = typer.Option(False, "--missing", help="Also delete sources whose files no longer exist."),
    store: Path | None = typer.Option(None, "--store", help=STORE_HELP),
) -> None:
    """Delete sources from the store. Exit 1 if nothing matched."""
    if not sources and not missing:
        err.print("[red]error:[/red] name a SOURCE or pass --missing")
        raise typer.Exit(2)
    kb = _open(store)
    removed: list[str] = []
    for source in sources or []:
        got = kb.remove(source)
        if not got:
            err.print(f"[yellow]no source matches[/yellow] {source}", soft_wrap=True)
        removed += got
    if missing:
        removed += kb.prune_missing()
    for source in removed:
        console.print(f"removed {source}", highlight=False, soft_wrap=True)
    console.print(f"{len(removed)} sources removed")
    if not removed:
        raise typer.Exit(1)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    kb_app()
