"""What the roles are told about the problem and the hardware: the target brief's facts."""

from __future__ import annotations

import re
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
    fits = _cache_fits(seed_verdict, facts)
    return ProblemView(
        name=problem.name,
        target=config.target,
        description=reconcile_description(problem.description, fits),
        reference_code=reference_code,
        hardware=hardware,
        roofline=_roofline(seed_verdict, facts),
        bottleneck=bottleneck(seed_verdict, profile, fits),
        build=build_command(config.target),
        test_shapes="; ".join(problem.shape_label(p) for p in problem.tests),
        benchmark_shapes="; ".join(problem.shape_label(p) for p in problem.benchmarks),
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


def _cache_fits(seed_verdict: Verdict | None, host: HostFacts | None) -> list[bool]:
    """Per benchmark shape on the CPU: whether its working set fits in a cache level ([] elsewhere)."""
    if seed_verdict is None or host is None:
        return []
    return [bool(cache_fit(b.bytes, host).startswith("fits")) for b in seed_verdict.benchmarks if b.bytes]


# A problem text's claim that the kernel is bound by DRAM bandwidth ("is bound by memory bandwidth",
# "is memory-bound"): true of data that streams from DRAM, not of shapes whose working set fits in cache.
_BANDWIDTH_CLAIM = re.compile(
    r"\b(is|are)\s+(?:(?:bound|limited)\s+by\s+(?:the\s+)?(?:memory|DRAM|HBM)\s+bandwidth|memory[- ]bound"
    r"|bandwidth[- ]bound)",
    re.I,
)


def reconcile_description(description: str, fits: list[bool]) -> str:
    """The problem text, its bandwidth claim qualified when the brief's roofline says the benchmark
    shapes fit in cache: the prompt must not say both 'bound by memory bandwidth' and 'not
    DRAM-bound'; the measured roofline wins."""
    if not fits or not any(fits):
        return description
    where = "every benchmark shape fits" if all(fits) else "some benchmark shapes fit"
    return _BANDWIDTH_CLAIM.sub(
        lambda m: f"would be {m.group(0).split(None, 1)[1]} if its data streamed from DRAM (on this target "
        f"{where} in cache)",
        description,
    )


def bottleneck(seed_verdict: Verdict | None, profile: TargetProfile | None, fits: list[bool]) -> str:
    """What bounds the benchmark shapes, in a few words (the literature search's question): cache-
    resident on the CPU, else memory- or compute-bound by the roofline's larger term."""
    if seed_verdict is None or not seed_verdict.benchmarks:
        return ""
    if fits and all(fits):
        return ("working set fits in cache: bound by instruction throughput (vectorisation, SIMD, exp) "
                "and cache bandwidth, not DRAM")
    if profile is None:
        return ""
    memory = compute = 0
    for b in seed_verdict.benchmarks:
        peak = profile.peak_tflops.get("fp32") or max(profile.peak_tflops.values(), default=0)
        t_flops = b.flops / (peak * 1e12) if b.flops and peak else 0.0
        t_bytes = b.bytes / (profile.memory_tbps * 1e12) if b.bytes and profile.memory_tbps else 0.0
        if t_bytes or t_flops:
            memory += t_bytes >= t_flops
            compute += t_flops > t_bytes
    if memory and not compute:
        return "memory-bound: memory bandwidth, coalesced vectorised loads, one pass over the data"
    if compute and not memory:
        return "compute-bound: arithmetic throughput, matrix instructions, tiling for reuse"
    return "mixed: some shapes memory-bound, some compute-bound" if memory or compute else ""
