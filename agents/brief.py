"""The target brief: the facts about hardware, build and problem that each role needs, and the
role checklists per target.

A model that writes or judges kernel code works blind without the instruction set, the cache
sizes, the compile command, the shapes it will be tested on and the tolerance; the graph fills
these fields of the ProblemView (graph/problem_view.py), and this module decides which of them
each role reads, so no role is shown facts it cannot use.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from agents.prompts import PROMPTS_DIR
from agents.views import ProblemView

# Which parts of the brief each role reads. "shapes" holds the benchmark shapes with their roofline
# (FLOPs, bytes, speed of light, cache fit), for the roles that judge what bounds a kernel;
# "shape_names" the same shapes by name, for the Coder, who carries out a plan already aimed.
ROLE_PARTS: dict[str, tuple[str, ...]] = {
    "selector": ("hardware",),
    "researcher": ("hardware", "build", "shapes", "tolerance"),
    "coder": ("hardware", "build", "shape_names", "tolerance"),
    "critic_review": ("hardware", "build", "shapes", "tolerance"),
    "critic_explain": ("hardware", "shapes"),
}


def target_family(target: str) -> str:
    """'cpu' or 'gpu': the checklists differ by family, not by vendor."""
    return "cpu" if target == "cpu" else "gpu"


def roofline_with_times(roofline: str, times: dict[str, str]) -> str | None:
    """The roofline's lines, each followed by the kernels' times on its shape ('- rows=8, cols=8: ...;
    k1 700 µs, k0 900 µs'): one list of the shapes, not a second table of them. None when a shape
    with times has no roofline line (the caller shows its own table)."""
    lines = roofline.splitlines()
    names = [line.split(":")[0].lstrip("- ") for line in lines]
    if not times or not set(times) <= set(names):
        return None
    return "\n".join(f"{line}; {times[name]}" if times.get(name) else line for line, name in zip(lines, names, strict=True))


def target_brief(problem: ProblemView, role: str, times: dict[str, str] | None = None) -> str:
    """The brief's parts that `role` reads, as one block; '' when the view holds none of them.
    `times` (shape: the kernels' times on it) joins the roofline's lines; the caller checks with
    roofline_with_times that every shape has one."""
    parts = ROLE_PARTS.get(role, ())
    blocks: list[str] = []
    if "hardware" in parts and problem.hardware:
        blocks.append(f"Hardware:\n{problem.hardware}")
    if "build" in parts and problem.build:
        blocks.append(f"Build: {problem.build}")
    if ("shapes" in parts or "shape_names" in parts) and problem.test_shapes:
        blocks.append(f"Test shapes (checked for correctness): {problem.test_shapes}")
    if "shapes" in parts and problem.roofline:
        joined = roofline_with_times(problem.roofline, times) if times else None
        blocks.append(f"Benchmark shapes (timed; roofline):\n{joined or problem.roofline}")
    elif "shape_names" in parts and (problem.benchmark_shapes or problem.roofline):
        # A view built before the names were kept (a resumed run) still has them in its roofline.
        names = problem.benchmark_shapes or "; ".join(line.split(":")[0].lstrip("- ") for line in problem.roofline.splitlines())
        blocks.append(f"Benchmark shapes (timed): {names}")
    if "tolerance" in parts and problem.tolerance:
        blocks.append(f"Tolerance: {problem.tolerance}")
    return "\n".join(blocks)


@cache
def _checklists(directory: str) -> dict[str, dict[str, list[str]]]:
    path = Path(directory) / "checklists.yml"
    data = yaml.safe_load(path.read_text()) or {}
    lists = {family: {role: list(items) for role, items in roles.items()} for family, roles in data.items()}
    for family, roles in lists.items():
        for role, items in roles.items():
            # An unquoted item holding ": " reads as a mapping and would reach a prompt as a Python dict.
            if not all(isinstance(item, str) for item in items):
                raise ValueError(f"{path}: {family}.{role} holds an item that is not text (quote items with ': ')")
    return lists


def checklist(target: str, role: str, directory: str | None = None) -> str:
    """The role's checklist for the target's family, one item a line; '' when it has none."""
    items = _checklists(directory or str(PROMPTS_DIR)).get(target_family(target), {}).get(role, [])
    return "\n".join(f"- {item}" for item in items)
