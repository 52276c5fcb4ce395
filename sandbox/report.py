"""Print a verdict as tables a person can read at a glance."""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from sandbox.summary import num
from sandbox.verdict import BuildRecord, Status, Verdict

_STATUS_STYLE = {
    Status.ok: "bold green",
    Status.wrong_output: "bold red",
    Status.build_error: "bold red",
    Status.runtime_error: "bold red",
    Status.crash: "bold red",
    Status.timeout: "bold yellow",
    Status.harness_error: "bold magenta",
    Status.built: "bold cyan",
}


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)  # as num() writes a missing value


def _paired_cell(ratio: float | None, interval: tuple[float, float] | None, difference: str) -> str:
    """base / candidate timed side by side: `1.12× [1.05–1.19] faster`."""
    if ratio is None:
        return difference
    within = f" [{num(interval[0])}–{num(interval[1])}]" if interval else ""
    return f"{num(ratio)}×{within} {difference}"


def _context_line(verdict: Verdict) -> str:
    """Problem, target, device and torch where the verdict knows them: a crash before the judge
    described its environment leaves them out rather than printing question marks."""
    env = verdict.environment
    parts = [f"problem [bold]{verdict.problem.name}[/bold]"] if verdict.problem else []
    parts.append(f"target {verdict.target}")
    parts += [f"{key} {env[key]}" for key in ("device", "torch") if env.get(key)]
    parts.append(f"{verdict.wall_seconds:.1f} s")
    host = verdict.host or {}
    if host.get("noisy"):
        before = host.get("before") or {}
        parts.append(f"[yellow]timed on a busy host (load {before.get('load_1m', '?')} on {before.get('cores', '?')} cores)[/yellow]")
    return " · ".join(parts)


def _cache_cell(rec: BuildRecord) -> str:
    if not rec.ok:
        return "[red]failed[/red]"
    return "hit" if rec.cached else "built"


def _static_target(static: dict) -> str:
    """The chip and the compiler the static report is for ('gfx942, clang++-19 (...)'): a gfx940 report
    from an older hipcc reads differently from the MI300X's own, and the reader must see which it is."""
    return ", ".join(str(part) for part in (static.get("arch_used") or static.get("vendor"), static.get("compiler")) if part)


_HARNESS_DIR = str(Path(__file__).resolve().parent)
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+')


def candidate_trace(trace: str) -> str:
    """A candidate's traceback without the harness's frames: the runner calls the candidate from
    the sandbox's own code, and those frames say nothing to the kernel's author. Everything else
    (the candidate's frames, the exception, chained causes) stays; a trace that is all harness
    (the harness's own failure) is kept whole."""
    kept: list[str] = []
    dropped = 0
    in_harness = False
    for line in trace.splitlines():
        frame = _FRAME.match(line)
        if frame:
            in_harness = frame["file"].startswith(_HARNESS_DIR + "/")
            dropped += in_harness
        elif not line.startswith("    "):
            in_harness = False  # the exception line or a chain's header ends a frame
        if not in_harness:
            kept.append(line)
    candidate_frames = sum(1 for line in kept if _FRAME.match(line))
    return "\n".join(kept) if dropped and candidate_frames else trace


def render_verdict(verdict: Verdict, console: Console) -> None:
    head = (
        f"[{_STATUS_STYLE.get(verdict.status, 'bold')}]{verdict.status.value}[/]  {escape(verdict.message)}\n"
        + _context_line(verdict)
    )
    console.print(Panel(head, title="verdict", expand=False))
    if verdict.build.records:
        table = Table(title="build", show_edge=False)
        for col in ("library", "language", "cache", "seconds"):
            table.add_column(col)
        for rec in verdict.build.records:
            table.add_row(rec.name, rec.lang, _cache_cell(rec), f"{rec.seconds:.2f}")
        console.print(table)
    static = verdict.static or {}
    if static.get("kernels"):
        table = Table(title=f"static report ({_static_target(static)})", show_edge=False)
        for col in ("kernel", "regs", "shared B", "spills", "occupancy", "notable"):
            table.add_column(col)
        for k in static["kernels"]:
            regs = k.get("vgprs") if k.get("vgprs") is not None else k.get("registers")
            spills = (k.get("vgpr_spills") or 0) + (k.get("sgpr_spills") or 0) + (k.get("spill_store_bytes") or 0)
            notable = ", ".join(f"{n} {c}" for n, c in list((k.get("instructions") or {}).items())[:4])
            table.add_row(
                str(k.get("demangled") or k.get("name"))[:40], str(regs), str(k.get("shared_bytes")), str(spills),
                f"{k.get('occupancy')} {k.get('occupancy_unit', '')}", notable,
            )
        console.print(table)
    for diag in verdict.diagnostics[:10]:
        console.print(f"[red]{escape(str(diag.file))}:{diag.line}[/red] {diag.severity}: {escape(diag.message)}")
    if verdict.tests:
        table = Table(title="tests", show_edge=False)
        for col in ("shape", "result", "max abs err", "detail"):
            table.add_column(col, overflow="fold")
        for t in verdict.tests:
            mark = "[green]pass[/green]" if t.passed else "[red]FAIL[/red]"
            table.add_row(escape(t.shape), mark, _num(t.max_abs_error, "{:.3g}"), "" if t.passed else escape(t.message[:300]))
        console.print(table)
    if verdict.benchmarks:
        table = Table(title="benchmarks (µs; median over repetitions)", show_edge=False)
        paired = any(b.paired for b in verdict.benchmarks)
        columns = ["shape", "median", "95% interval", "reps", "ref", "speed-up", "%SOL"] + (["vs base [95%]"] if paired else [])
        for col in columns:
            table.add_column(col, justify="left" if col == "shape" else "right")
        for b in verdict.benchmarks:
            table.add_row(
                escape(b.shape),
                num(b.median_us),
                f"{num(b.ci_us[0])}–{num(b.ci_us[1])}" if b.ci_us else "-",
                str(b.reps),
                num(b.reference_median_us),
                _num(b.speedup, "{:.2f}×"),
                _num(b.pct_sol, "{:.1f}"),
                *([_paired_cell(b.paired.ratio, b.paired.ratio_ci, b.paired.difference) if b.paired else "-"]
                  if paired else []),
            )
        s = verdict.summary
        if s is not None:
            table.add_section()
            geo_ci = f"{num(s.geomean_ci_us[0])}–{num(s.geomean_ci_us[1])}" if s.geomean_ci_us else ""
            table.add_row(
                "[bold]geomean[/bold]", f"[bold]{num(s.geomean_us)}[/bold]", geo_ci, "",
                num(s.reference_geomean_us), _num(s.speedup, "{:.2f}×"), _num(s.pct_sol_geomean, "{:.1f}"),
                *([_paired_cell(s.paired.ratio, s.paired.ratio_ci, s.paired.difference) if s.paired else "-"]
                  if paired else []),
            )
        console.print(table)
        method = verdict.timing_method or {}
        if method:
            console.print(f"[dim]timed with {method.get('method')}: {method.get('note', '')}[/dim]")
            for problem_line in method.get("problems") or []:
                console.print(f"[yellow]profiler:[/yellow] {problem_line}")
    if verdict.status not in (Status.ok, Status.built) and verdict.errors:
        console.print(Panel(Text(candidate_trace(verdict.errors[-1])[-1500:]), title="error", style="red", expand=False))
