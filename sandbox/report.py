"""Print a verdict as tables a person can read at a glance."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from sandbox.verdict import Status, Verdict

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
    return "—" if value is None else fmt.format(value)


def render_verdict(verdict: Verdict, console: Console) -> None:
    problem = verdict.problem.name if verdict.problem else "?"
    env = verdict.environment
    head = (
        f"[{_STATUS_STYLE.get(verdict.status, 'bold')}]{verdict.status.value}[/]  {verdict.message}\n"
        f"problem [bold]{problem}[/bold] · target {verdict.target} · device {env.get('device', '?')} · "
        f"torch {env.get('torch', '?')} · {verdict.wall_seconds:.1f} s"
    )
    console.print(Panel(head, title="verdict", expand=False))
    if verdict.build.records:
        table = Table(title="build", show_edge=False)
        for col in ("library", "language", "cache", "seconds"):
            table.add_column(col)
        for rec in verdict.build.records:
            table.add_row(rec.name, rec.lang, "hit" if rec.cached else "built", f"{rec.seconds:.2f}")
        console.print(table)
    static = verdict.static or {}
    if static.get("kernels"):
        table = Table(title=f"static report ({static.get('arch_used') or static.get('vendor')})", show_edge=False)
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
        console.print(f"[red]{diag.file}:{diag.line}[/red] {diag.severity}: {diag.message}")
    if verdict.tests:
        table = Table(title="tests", show_edge=False)
        for col in ("shape", "result", "max abs err", "detail"):
            table.add_column(col, overflow="fold")
        for t in verdict.tests:
            mark = "[green]pass[/green]" if t.passed else "[red]FAIL[/red]"
            table.add_row(t.shape, mark, _num(t.max_abs_error, "{:.3g}"), "" if t.passed else t.message[:300])
        console.print(table)
    if verdict.benchmarks:
        table = Table(title="benchmarks (µs; median over repetitions)", show_edge=False)
        for col in ("shape", "median", "p25–p75", "reps", "ref", "speed-up", "%SOL"):
            table.add_column(col, justify="left" if col == "shape" else "right")
        for b in verdict.benchmarks:
            table.add_row(
                b.shape,
                _num(b.median_us, "{:,.1f}"),
                f"{b.p25_us:,.1f}–{b.p75_us:,.1f}",
                str(b.reps),
                _num(b.reference_median_us, "{:,.1f}"),
                _num(b.speedup, "{:.2f}×"),
                _num(b.pct_sol, "{:.1f}"),
            )
        s = verdict.summary
        if s is not None:
            table.add_section()
            table.add_row(
                "[bold]geomean[/bold]", f"[bold]{_num(s.geomean_us, '{:,.1f}')}[/bold]", "", "",
                _num(s.reference_geomean_us, "{:,.1f}"), _num(s.speedup, "{:.2f}×"), _num(s.pct_sol_geomean, "{:.1f}"),
            )
        console.print(table)
        method = verdict.timing_method or {}
        if method:
            console.print(f"[dim]timed with {method.get('method')}: {method.get('note', '')}[/dim]")
            for problem_line in method.get("problems") or []:
                console.print(f"[yellow]profiler:[/yellow] {problem_line}")
    if verdict.status not in (Status.ok, Status.built) and verdict.errors:
        console.print(Panel(verdict.errors[-1][-1500:], title="error", style="red", expand=False))
