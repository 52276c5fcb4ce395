"""What the roles are told about the problem and the hardware."""

from __future__ import annotations

from pathlib import Path

from agents.views import ProblemView
from graph.archive import Archive
from graph.config import RunConfig
from sandbox.problem import load_problem
from sandbox.verdict import Verdict


def problem_view(archive: Archive, config: RunConfig, seed_verdict: Verdict | None) -> ProblemView:
    """What the roles are told about the problem and the hardware, partly from the seed's verdict
    (its target profile and per-shape roofline)."""
    problem_path = Path(archive.get_meta("problem_path"))
    problem = load_problem(problem_path, config.target)
    reference = problem.path / "reference.py" if problem.path.is_dir() else problem.path
    reference_code = reference.read_text()[:8000] if reference.is_file() else ""
    hardware, roofline = "", ""
    if seed_verdict is not None:
        if seed_verdict.target_profile:
            from sandbox.targets import TargetProfile

            try:
                hardware = TargetProfile(**seed_verdict.target_profile).summary()
            except TypeError:
                hardware = ""
        lines = []
        for b in seed_verdict.benchmarks:
            parts = [b.shape]
            if b.flops:
                parts.append(f"{b.flops:.3g} FLOP")
            if b.bytes:
                parts.append(f"{b.bytes:.3g} bytes")
            if b.sol_us:
                parts.append(f"speed of light {b.sol_us:.4g} µs")
            parts.append(f"seed {b.median_us:.4g} µs")
            if b.reference_median_us:
                parts.append(f"PyTorch reference {b.reference_median_us:.4g} µs")
            lines.append("- " + "; ".join(parts))
        roofline = "\n".join(lines)
    return ProblemView(
        name=problem.name,
        target=config.target,
        description=problem.description,
        reference_code=reference_code,
        hardware=hardware,
        roofline=roofline,
    )
