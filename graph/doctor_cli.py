"""`kernel-scientist doctor`: print what each target can do here, and the commands that fix the rest."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from graph.doctor import TARGETS, Finding, examine, usable


def render(findings: list[Finding], targets: list[str], console: Console) -> None:
    """One table of findings, then one line per target: usable here or not."""
    table = Table(title="kernel-scientist doctor", show_lines=False)
    for column in ("target", "check", "", "found", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        mark = "[green]ok[/green]" if f.ok else ("[red]missing[/red]" if f.required else "[yellow]missing[/yellow]")
        table.add_row(f.target, f.name, mark, f.detail, f.fix)
    console.print(table)
    for target in targets:
        if usable(findings, target):
            console.print(f"[green]{target}: evaluations can run here[/green]")
        else:
            missing = ", ".join(f.name for f in findings if f.required and not f.ok and f.target in (target, "any"))
            console.print(f"[red]{target}: evaluations cannot run here[/red] (missing: {missing})")


def doctor(target: str | None, json_out: Path | None, console: Console) -> int:
    """Exit code 0 when every asked-for target can run evaluations here, 1 when one cannot, 2 for a bad target."""
    if target is not None and target not in TARGETS:
        console.print(f"[red]error:[/red] --target must be one of {', '.join(TARGETS)}, not {target!r}")
        return 2
    targets = [target] if target else list(TARGETS)
    with console.status("checking this machine"):
        findings = examine(targets)
    render(findings, targets, console)
    if json_out is not None:
        payload = {"findings": [f.model_dump() for f in findings],
                   "usable": {t: usable(findings, t) for t in targets}}
        json_out.write_text(json.dumps(payload, indent=1))
        console.print(f"[dim]findings written to {json_out}[/dim]")
    # Without --target the doctor only reports: most machines lack one GPU vendor or the other.
    return 0 if target is None or usable(findings, target) else 1
