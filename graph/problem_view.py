"""What the roles are told about the problem and the hardware: the target brief's facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.views import ProblemView
from graph.archive import Archive
from graph.config import RunConfig
from graph.target_brief import HostFacts, build_command, cache_fit, cpu_hardware, gpu_hardware, read_host
from sandbox.problem import Problem, load_problem
from sandbox.summary import num
from sandbox.targets import TargetProfile
from sandbox.verdict import Verdict


def problem_view(
    archive: Archive, config: RunConfig, seed_verdict: Verdict | None, host: HostFacts | dict[str, Any] | None = None
) -> ProblemView:
    """What the roles are told about the problem and the hardware, partly from the seed's verdict
    (its target profile and per-shape roofline). `host` overrides the CPU host read from /proc
    (fixtures and tests); it is read here only for the CPU target."""
    problem_path = Path(archive.get_meta("problem_path"))
    problem = load_problem(problem_path, config.target)
    reference = problem.path / "reference.py" if problem.path.is_dir() else problem.path
    reference_code = reference.read_text()[:8000] if reference.is_file() else ""
    profile = _profile(seed_verdict)
    facts: HostFacts | None = None
    if config.target == "cpu":
        facts = HostFacts.model_validate(host) if isinstance(host, dict) else host or read_host()
        hardware = cpu_hardware(profile, facts)
    else:
        hardware = gpu_hardware(profile) if profile is not None else ""
    return ProblemView(
        name=problem.name,
        target=config.target,
        description=problem.description,
        reference_code=reference_code,
        hardware=hardware,
        roofline=_roofline(seed_verdict, facts),
        build=build_command(config.target),
        test_shapes="; ".join(problem.shape_label(p) for p in problem.tests),
        tolerance=tolerance_text(problem),
    )


def _profile(seed_verdict: Verdict | None) -> TargetProfile | None:
    if seed_verdict is None or not seed_verdict.target_profile:
        return None
    try:
        return TargetProfile(**seed_verdict.target_profile)
    except TypeError:
        return None


def _roofline(seed_verdict: Verdict | None, host: HostFacts | None) -> str:
    """One line per benchmark shape: work, traffic, speed of light, the seed's and PyTorch's times,
    and on the CPU where its working set fits."""
    if seed_verdict is None:
        return ""
    lines = []
    for b in seed_verdict.benchmarks:
        parts = []
        if b.flops:
            parts.append(f"{b.flops:.3g} FLOP")
        if b.bytes:
            parts.append(f"{b.bytes:.3g} B")
        if b.sol_us:
            parts.append(f"speed of light {num(b.sol_us)} µs")
        parts.append(f"seed {num(b.median_us)} µs")
        if b.reference_median_us:
            parts.append(f"PyTorch {num(b.reference_median_us)} µs")
        fit = cache_fit(b.bytes, host)
        if fit:
            parts.append(fit)
        lines.append(f"- {b.shape}: " + ", ".join(parts))
    return "\n".join(lines)


def tolerance_text(problem: Problem) -> str:
    """The correctness test in words: the tolerance the judge applies, or where the check lives."""
    if problem.tolerance is None:
        return "the problem's own check_implementation (see the reference code)"
    rtol, atol = problem.tolerance
    return f"rtol {rtol:g}, atol {atol:g}: |out - ref| <= atol + rtol * |ref| per element"
