"""What the roles see: small typed views of the problem and the population, and their rendering.

The graph builds these from its archive and the sandbox; the roles never read files of a run.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from knowledge.models import concise
from sandbox.summary import num, num_interval


class ProblemView(BaseModel):
    name: str
    target: str
    description: str = ""
    reference_code: str = ""
    hardware: str = ""  # the target brief's hardware lines (profile and, on the CPU, the host)
    roofline: str = ""  # per benchmark shape: FLOPs, bytes, speed of light, cache fit
    build: str = ""  # the exact build command a submission's kernel gets
    test_shapes: str = ""  # the shapes checked for correctness
    benchmark_shapes: str = ""  # the shapes timed, by name only (the roofline holds them with their figures)
    tolerance: str = ""  # how close to the reference an output must be
    bottleneck: str = ""  # what bounds the benchmark shapes, in a few words (the literature query's)


class KernelView(BaseModel):
    """One population member (the archive's KernelRecord carries these fields and more)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    generation: int = 0
    origin: str = "llm"
    parents: list[str] = Field(default_factory=list)
    summary: str = ""
    source: str = ""
    status: str
    message: str = ""
    geomean_us: float | None = None
    geomean_ci_us: tuple[float, float] | None = None
    noisy: bool = False
    benchmarks: dict[str, float] = Field(default_factory=dict)
    plan: dict[str, Any] | None = None  # the experiment plan that produced it (None: the seed)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.geomean_us is not None

    def time_text(self) -> str:
        """Its geometric mean with the 95% interval, marked when the host was busy while it was timed."""
        text = num_interval(self.geomean_us, self.geomean_ci_us, "µs")
        return text + " (timed on a busy host)" if self.noisy and self.geomean_us is not None else text


def population_table(kernels: list[KernelView], limit: int = 40) -> str:
    """A compact table of the population: the best first, then the most recent failures."""
    ok = sorted((k for k in kernels if k.ok), key=lambda k: k.geomean_us or 0.0)
    failed = [k for k in reversed(kernels) if not k.ok]
    rows = (ok + failed)[:limit]
    shapes = sorted({s for k in rows for s in k.benchmarks})
    lines = ["| id | parents | origin | status | geomean µs [95% interval] | " + " | ".join(shapes) + " | summary |"]
    lines.append("|" + " --- |" * (6 + len(shapes)))
    for k in rows:
        per_shape = " | ".join(num(k.benchmarks[s]) if s in k.benchmarks else "-" for s in shapes)
        geo = k.time_text().replace(" µs", "")
        summary = k.summary.replace("|", "/")[:120]
        lines.append(
            f"| {k.id} | {','.join(k.parents) or '-'} | {k.origin} | {k.status} | {geo} | {per_shape} | {summary} |"
        )
    if len(ok) + len(failed) > limit:
        lines.append(f"({len(ok) + len(failed) - limit} more not shown)")
    if len(ok) > 1:
        lines.append("Times whose intervals overlap are not measurably different; only a side-by-side timing ranks them.")
    return "\n".join(lines)


def shape_table(first: KernelView | None, second: KernelView | None, names: tuple[str, str]) -> str:
    """Per-shape medians side by side; '' when there is nothing to compare (the block is left out)."""
    if first is None:
        return ""
    shapes = sorted(set(first.benchmarks) | set(second.benchmarks if second else {}))
    if not shapes:
        return ""
    if second is None:
        return "\n".join(f"- {s}: {num(first.benchmarks[s])}" for s in shapes)
    lines = [f"| shape | {names[0]} | {names[1]} |", "| --- | --- | --- |"]
    for s in shapes:
        a = first.benchmarks.get(s)
        b = second.benchmarks.get(s)
        lines.append(f"| {s} | {num(a)} | {num(b)} |")  # num writes a missing value as '-'
    return "\n".join(lines)


def finding_line(finding: dict[str, Any], lesson_chars: int = 200) -> str:
    """One finding of the run in a line: `[g2e0] k5 of k3, fuse passes: 1.21x (ok). Lesson: ...`; the
    lesson cut at a sentence within `lesson_chars` (the explanation is left to the chat and the
    Researcher)."""
    measured = finding.get("measured_speedup")
    result = f"{num(measured)}x" if measured else "no speed-up measured"
    kernel = finding.get("kernel_id") or (f"same code as {finding['duplicate_of']}" if finding.get("duplicate_of")
                                          else "no kernel")
    lesson = concise(str(finding.get("lesson") or ""), lesson_chars)
    head = (f"[{finding.get('experiment_id', '-')}] {kernel} of {finding.get('parent_id') or '-'}, "
            f"{finding.get('title', '')}: {result} ({finding.get('status', '-')})")
    return head + (f". Lesson: {lesson}" if lesson else "")


def directives_text(directives: list[str]) -> str:
    """The user's directives as a list; '' when there are none (the block is left out)."""
    return "\n".join(f"- {d}" for d in directives)


def source_diff(before: str, after: str, names: tuple[str, str] = ("base", "candidate"), limit: int = 6000) -> str:
    """A unified diff with two lines of context: what a reader needs to see a change, not the file twice."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), *names, lineterm="", n=2)
    return "\n".join(diff)[:limit]


# Two sources sharing at least this fraction of their lines are shown as a diff, not twice in full.
SHARED_LINES = 0.5


def as_diff_or_whole(base: str, other: str, names: tuple[str, str]) -> tuple[str, str]:
    """(form, text): `other` as a diff against `base` when they share most lines and the diff is
    shorter, else whole. The form says which, for the prompt."""
    matcher = difflib.SequenceMatcher(None, base.splitlines(), other.splitlines(), autojunk=False)
    if matcher.ratio() >= SHARED_LINES:
        # Whole (a diff cut at a length would pass for a complete one), without its ---/+++ lines: the
        # prompt names both sides where it says "as a diff against".
        diff = "\n".join(source_diff(base, other, names, limit=len(base) + len(other) + 1000).splitlines()[2:])
        if diff and len(diff) < len(other):
            return f"as a diff against {names[0]}", diff
    return "whole", other


_REPORT_LINE = re.compile(r"^line (\d+): (.+)$")


def compact_report(report: str) -> str:
    """A static report with its per-line verdicts grouped: 'lines 48, 56, 67: SIMD intrinsics' once,
    not the same verdict on three lines. Other lines are kept as they are, in their order."""
    lines = report.splitlines()
    groups: dict[str, list[str]] = {}
    for line in lines:
        match = _REPORT_LINE.match(line)
        if match:
            groups.setdefault(match[2], []).append(match[1])
    if all(len(numbers) == 1 for numbers in groups.values()):
        return report
    out: list[str] = []
    for line in lines:
        match = _REPORT_LINE.match(line)
        if not match:
            out.append(line)
        elif match[2] in groups:
            numbers = groups.pop(match[2])
            out.append(f"line{'s' if len(numbers) > 1 else ''} {', '.join(numbers)}: {match[2]}")
    return "\n".join(out)
