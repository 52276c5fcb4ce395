"""Device profiles: the peaks that define a problem's speed of light.

Peaks are the vendors' dense datasheet figures (TFLOP/s, TB/s); `measured`
holds ceilings measured on a real machine where we have them. The CPU has no
datasheet: its profile is measured once per machine (a float32 matmul and a
large copy through torch) and cached.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox import buildcache


@dataclass(frozen=True)
class TargetProfile:
    name: str
    vendor: str  # amd, nvidia, cpu
    arch: str
    compute_units: int
    wave_size: int
    shared_memory_kb: int  # LDS per CU on AMD, shared memory per block on NVIDIA
    registers_per_lane: int
    l2_mb: float
    peak_tflops: dict[str, float]
    memory_tbps: float
    measured: dict[str, float] = field(default_factory=dict)
    notes: str = ""

    def sol_seconds(self, flops: float | None, nbytes: float | None, compute: str) -> float | None:
        """max(FLOPs / peak, bytes / bandwidth): no kernel can beat this."""
        times = []
        if flops:
            peak = self.peak_tflops.get(compute) or self.peak_tflops.get("fp32")
            if peak:
                times.append(flops / (peak * 1e12))
        if nbytes and self.memory_tbps:
            times.append(nbytes / (self.memory_tbps * 1e12))
        return max(times) if times else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PROFILES: dict[str, TargetProfile] = {
    "mi300x": TargetProfile(
        name="mi300x",
        vendor="amd",
        arch="gfx942",
        compute_units=304,
        wave_size=64,
        shared_memory_kb=64,
        registers_per_lane=512,
        l2_mb=4.0,  # per XCD; plus 256 MB Infinity Cache
        peak_tflops={"fp8": 2614.9, "bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7, "fp32": 163.4},
        memory_tbps=5.3,
        notes="CDNA3; MFMA; 256 arch VGPRs + 256 AGPRs per wave",
    ),
    "mi325x": TargetProfile(
        name="mi325x",
        vendor="amd",
        arch="gfx942",
        compute_units=304,
        wave_size=64,
        shared_memory_kb=64,
        registers_per_lane=512,
        l2_mb=4.0,
        peak_tflops={"fp8": 2614.9, "bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7, "fp32": 163.4},
        memory_tbps=6.0,
        notes="CDNA3 with HBM3E (256 GB)",
    ),
    "h100": TargetProfile(
        name="h100",
        vendor="nvidia",
        arch="sm_90a",
        compute_units=132,
        wave_size=32,
        shared_memory_kb=227,
        registers_per_lane=255,
        l2_mb=50.0,
        peak_tflops={"fp8": 1979.0, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},
        memory_tbps=3.35,
        measured={"bf16": 705.0, "fp8": 1285.0, "memory_tbps": 3.0},
        notes="Hopper SXM; wgmma needs sm_90a",
    ),
    "h200": TargetProfile(
        name="h200",
        vendor="nvidia",
        arch="sm_90a",
        compute_units=132,
        wave_size=32,
        shared_memory_kb=227,
        registers_per_lane=255,
        l2_mb=60.0,
        peak_tflops={"fp8": 1979.0, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},
        memory_tbps=4.8,
        measured={"bf16": 788.0, "memory_tbps": 4.3},
        notes="Hopper with HBM3E (141 GB)",
    ),
}


def profile_for_device_name(device_name: str) -> TargetProfile | None:
    """Match a torch device name ('NVIDIA H100 80GB HBM3', 'AMD Instinct MI300X')."""
    lowered = device_name.lower()
    for key in ("mi325x", "mi300x", "h200", "h100"):
        if key in lowered:
            return PROFILES[key]
    return None


def cpu_profile() -> TargetProfile:
    """This machine's CPU, measured once and cached in the build cache folder."""
    from sandbox.native import _cpu_model  # one definition of the CPU's name

    model = _cpu_model()
    cache = buildcache.cache_root().parent / f"cpu-profile-{buildcache.cache_key(model)}.json"
    try:
        data = json.loads(cache.read_text())
        return TargetProfile(**data)
    except (OSError, ValueError, TypeError):
        pass
    profile = _measure_cpu(model)
    cache.write_text(json.dumps(profile.to_dict()))
    return profile


def _measure_cpu(model: str) -> TargetProfile:
    import os

    import torch

    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best_mm = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        torch.mm(a, b)
        best_mm = min(best_mm, time.perf_counter() - start)
    # Stream-triad style: out = a + b over arrays far larger than any cache.
    elems = 32 * 1024 * 1024
    x, y, z = torch.randn(elems), torch.randn(elems), torch.empty(elems)
    torch.add(x, y, out=z)
    best_copy = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        torch.add(x, y, out=z)
        best_copy = min(best_copy, time.perf_counter() - start)
    fp32 = 2 * n**3 / best_mm / 1e12
    bandwidth = 3 * elems * 4 / best_copy / 1e12
    return TargetProfile(
        name="cpu",
        vendor="cpu",
        arch=model,
        compute_units=os.cpu_count() or 1,
        wave_size=1,
        shared_memory_kb=0,
        registers_per_lane=0,
        l2_mb=0.0,
        # No fp8/bf16 units on a typical host: everything runs at the fp32 rate.
        peak_tflops={"fp32": fp32},
        memory_tbps=bandwidth,
        measured={"fp32": fp32, "memory_tbps": bandwidth},
        notes="measured: best of 5 float32 1024^3 matmuls and of 5 torch.add triads over 3 x 128 MB",
    )
