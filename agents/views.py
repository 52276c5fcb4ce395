"""What the roles see: small typed views of the problem and the population, and their rendering.

The graph builds these from its archive and the sandbox; the roles never read files of a run.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sandbox.summary import num_interval


class ProblemView(BaseModel):
    name: str
    target: str
    description: str = ""
    reference_code: str = ""
    hardware: str = ""  # the target profile's summary
    roofline: str = ""  # FLOPs, bytes and speed of light per benchmark shape


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
        per_shape = " | ".join(f"{k.benchmarks[s]:.4g}" if s in k.benchmarks else "-" for s in shapes)
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
    if first is None:
        return "(no timings)"
    shapes = sorted(set(first.benchmarks) | set(second.benchmarks if second else {}))
    if not shapes:
        return "(no timings)"
    lines = [f"| shape | {names[0]} | {names[1]} |", "| --- | --- | --- |"]
    for s in shapes:
        a = first.benchmarks.get(s)
        b = second.benchmarks.get(s) if second else None
        lines.append(f"| {s} | {'-' if a is None else f'{a:.4g}'} | {'-' if b is None else f'{b:.4g}'} |")
    return "\n".join(lines)


def directives_text(directives: list[str]) -> str:
    return "\n".join(f"- {d}" for d in directives) if directives else "(none)"
