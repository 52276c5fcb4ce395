"""Device profiles: the peaks that define a problem's speed of light, and the
per-CU limits that bound occupancy.

Peaks are the vendors' dense datasheet figures (TFLOP/s, TB/s); `measured`
holds ceilings measured on a real machine where we have them. The CPU has no
datasheet: its profile is measured once per machine (a float32 matmul and a
large copy through torch) and cached.

"CU" means a compute unit on AMD and a streaming multiprocessor (SM) on NVIDIA;
"wave" means a wavefront (64 lanes on CDNA) or a warp (32 threads). The
occupancy limits follow the AMDGPU backend of LLVM for gfx90a/gfx940-class
chips (the same rules `-Rpass-analysis=kernel-resource-usage` applies) and the
CUDA programming guide's table for compute capability 9.0; `occupancy_amd`
and `occupancy_nvidia` turn a kernel's resource use into resident waves.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox import buildcache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TargetProfile:
    name: str
    vendor: str  # amd, nvidia, cpu
    arch: str
    compute_units: int
    wave_size: int
    shared_memory_kb: int  # the most one block may use (LDS on AMD, shared memory on NVIDIA)
    registers_per_lane: int  # the most one lane/thread may address (AMD: arch VGPRs + AGPRs)
    l2_mb: float  # whole chip
    peak_tflops: dict[str, float]
    memory_tbps: float
    measured: dict[str, float] = field(default_factory=dict)
    notes: str = ""
    # -- occupancy limits (0 where they do not apply, e.g. the CPU) ---------
    memory_gb: float = 0.0
    l3_mb: float = 0.0  # AMD Infinity Cache (memory-side last level)
    shared_memory_per_cu_kb: int = 0  # LDS per CU / shared memory per SM
    shared_memory_reserved_per_block: int = 0  # bytes the runtime keeps per block (NVIDIA: 1 KB)
    simds_per_cu: int = 0  # AMD SIMDs per CU; NVIDIA SM sub-partitions
    max_waves_per_simd: int = 0  # AMD hardware wave slots per SIMD
    max_waves_per_cu: int = 0  # resident waves (warps) per CU/SM
    max_blocks_per_cu: int = 0  # resident workgroups (blocks) per CU/SM
    max_threads_per_block: int = 0
    # AMD: the unified VGPR file holds this many 32-bit registers per lane per SIMD,
    # shared by arch VGPRs and AGPRs; allocation is in granules.
    vgprs_per_simd: int = 0
    vgpr_granule: int = 0
    sgprs_per_simd: int = 0
    sgpr_granule: int = 0
    max_sgprs_per_wave: int = 0
    # NVIDIA: 32-bit registers per SM, allocated per warp in units of this many.
    registers_per_cu: int = 0
    register_granule_per_wave: int = 0

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

    def summary(self) -> str:
        """One paragraph for prompts: what the chip offers and what bounds occupancy."""
        if self.vendor == "cpu":
            return (
                f"CPU {self.arch}: {self.compute_units} threads, measured fp32 "
                f"{self.peak_tflops.get('fp32', 0):.2f} TFLOP/s, {self.memory_tbps * 1000:.0f} GB/s."
            )
        peaks = ", ".join(f"{k} {v:g}" for k, v in self.peak_tflops.items())
        unit = "CUs" if self.vendor == "amd" else "SMs"
        text = (
            f"{self.name} ({self.arch}): {self.compute_units} {unit}, wave size {self.wave_size}, "
            f"peaks TFLOP/s {peaks}; memory {self.memory_tbps} TB/s, L2 {self.l2_mb:g} MB"
        )
        if self.l3_mb:
            text += f", Infinity Cache {self.l3_mb:g} MB"
        if self.vendor == "amd":
            text += (
                f". Per CU: {self.simds_per_cu} SIMDs, up to {self.max_waves_per_simd} waves per SIMD, "
                f"{self.shared_memory_per_cu_kb} KB LDS; per SIMD {self.vgprs_per_simd} VGPRs per lane "
                f"(arch VGPRs and AGPRs together, granule {self.vgpr_granule}), so a wave using N "
                f"registers fits {self.vgprs_per_simd}//N times (at most {self.max_waves_per_simd})."
            )
        else:
            text += (
                f". Per SM: {self.registers_per_cu} registers, up to {self.max_waves_per_cu} warps and "
                f"{self.max_blocks_per_cu} blocks, {self.shared_memory_per_cu_kb} KB shared memory "
                f"({self.shared_memory_kb} KB per block); "
                f"at most {self.registers_per_lane} registers per thread."
            )
        return text


# CDNA3 facts (MI300X/MI325X): AMD's hardware specification table (304 CUs,
# 64 KiB LDS, 512 KiB VGPR file and 12.5 KiB SGPR file per CU, 4 MiB L2 per
# XCD x 8, 256 MiB Infinity Cache) and LLVM's AMDGPU rules for gfx90a-class
# targets (4 SIMDs, 8 waves per SIMD, 512 VGPRs per lane in granules of 8,
# 800 SGPRs per SIMD in granules of 16).
_CDNA3: dict[str, Any] = dict(
    vendor="amd",
    arch="gfx942",
    compute_units=304,
    wave_size=64,
    shared_memory_kb=64,
    registers_per_lane=512,
    l2_mb=32.0,
    l3_mb=256.0,
    shared_memory_per_cu_kb=64,
    simds_per_cu=4,
    max_waves_per_simd=8,
    max_waves_per_cu=32,
    max_blocks_per_cu=16,  # multi-wave workgroups; single-wave ones may fill all 32 slots
    max_threads_per_block=1024,
    vgprs_per_simd=512,
    vgpr_granule=8,
    sgprs_per_simd=800,
    sgpr_granule=16,
    max_sgprs_per_wave=102,
    peak_tflops={"fp8": 2614.9, "int8": 2614.9, "bf16": 1307.4, "fp16": 1307.4, "tf32": 653.7,
                 "fp32": 163.4, "fp64": 163.4},
)

# Hopper (compute capability 9.0), SXM parts: 132 SMs, 64K registers and 64
# warps and 32 blocks per SM, 228 KB shared memory per SM of which a block may
# take 227 KB, 1 KB reserved per block, registers allocated per warp in 256s.
_HOPPER: dict[str, Any] = dict(
    vendor="nvidia",
    arch="sm_90a",
    compute_units=132,
    wave_size=32,
    shared_memory_kb=227,
    registers_per_lane=255,
    shared_memory_per_cu_kb=228,
    shared_memory_reserved_per_block=1024,
    simds_per_cu=4,
    max_waves_per_cu=64,
    max_blocks_per_cu=32,
    max_threads_per_block=1024,
    registers_per_cu=65536,
    register_granule_per_wave=256,
    peak_tflops={"fp8": 1979.0, "int8": 1979.0, "bf16": 989.4, "fp16": 989.4, "tf32": 494.7,
                 "fp32": 66.9, "fp64": 66.9},
)

PROFILES: dict[str, TargetProfile] = {
    "mi300x": TargetProfile(
        name="mi300x",
        memory_tbps=5.3,
        memory_gb=192.0,
        notes="CDNA3, 8 XCDs of 38 CUs; MFMA (fp8 as e4m3fnuz/e5m2fnuz); 256 arch VGPRs + 256 AGPRs per wave",
        **_CDNA3,
    ),
    "mi325x": TargetProfile(
        name="mi325x",
        memory_tbps=6.0,
        memory_gb=256.0,
        notes="CDNA3 like MI300X, with HBM3E",
        **_CDNA3,
    ),
    "h100": TargetProfile(
        name="h100",
        l2_mb=50.0,
        memory_tbps=3.35,
        memory_gb=80.0,
        measured={"bf16": 705.0, "fp8": 1285.0, "memory_tbps": 3.0},
        notes="Hopper SXM; wgmma (HGMMA, QGMMA for fp8) needs sm_90a",
        **_HOPPER,
    ),
    "h200": TargetProfile(
        name="h200",
        l2_mb=50.0,
        memory_tbps=4.8,
        memory_gb=141.0,
        measured={"bf16": 788.0, "memory_tbps": 4.3},
        notes="Hopper like H100 SXM, with HBM3E",
        **_HOPPER,
    ),
}

# Architecture names a compiler or torch reports (gcnArchName, sm_XY), to a profile.
_ARCH_PROFILES = {
    "gfx942": "mi300x", "gfx941": "mi300x", "gfx940": "mi300x", "sm_90": "h100", "sm_90a": "h100",
}


def profile_for_device_name(device_name: str) -> TargetProfile | None:
    """Match a torch device name ('NVIDIA H100 80GB HBM3', 'AMD Instinct MI300X')."""
    lowered = device_name.lower()
    for key in ("mi325x", "mi300x", "h200", "h100"):
        if key in lowered:
            return PROFILES[key]
    return None


def profile_for_arch(arch: str) -> TargetProfile | None:
    """Match an ISA name ('gfx942:sramecc+:xnack-', 'sm_90a', '90a')."""
    base = arch.split(":")[0].strip().lower()
    if base and base[0].isdigit():
        base = "sm_" + base
    key = _ARCH_PROFILES.get(base)
    return PROFILES[key] if key else None


# -- occupancy -----------------------------------------------------------------


def _round_up(value: int, granule: int) -> int:
    return -(-value // granule) * granule if granule else value


def occupancy_amd(
    profile: TargetProfile,
    vgprs: int,
    agprs: int = 0,
    sgprs: int = 0,
    lds_bytes: int = 0,
    block_size: int = 1024,
) -> dict[str, Any]:
    """Waves per SIMD that each resource allows, and the least of them.

    Arch VGPRs and AGPRs share one file: with AGPRs in use, the AGPRs start at
    the arch count rounded up to 4 (the kernel's accum_offset). `block_size`
    is the workgroup size the compiler assumed (max_flat_workgroup_size, 1024
    unless the kernel has launch bounds), which matters for the LDS limit.
    """
    max_waves = profile.max_waves_per_simd
    total_vgprs = _round_up(vgprs, 4) + agprs if agprs else vgprs
    alloc = _round_up(max(total_vgprs, 1), profile.vgpr_granule)
    limits: dict[str, int] = {"hardware": max_waves, "vgpr": min(max_waves, profile.vgprs_per_simd // alloc)}
    if sgprs:
        limits["sgpr"] = min(max_waves, profile.sgprs_per_simd // _round_up(sgprs, profile.sgpr_granule))
    waves_per_block = max(1, math.ceil(block_size / profile.wave_size))
    if waves_per_block > 1:
        groups = min(profile.max_waves_per_cu // waves_per_block, profile.max_blocks_per_cu)
    else:
        groups = profile.max_waves_per_cu
    if lds_bytes:
        groups = min(groups, (profile.shared_memory_per_cu_kb * 1024) // lds_bytes)
    # A workgroup's waves spread over the CU's SIMDs.
    limits["workgroup_lds"] = min(max_waves, groups * waves_per_block // profile.simds_per_cu)
    waves = min(limits.values())
    limiting = ["hardware"] if waves == max_waves else sorted(k for k, v in limits.items() if v == waves)
    return {
        "waves_per_simd": waves,
        "max_waves_per_simd": max_waves,
        "limits": limits,
        "limited_by": limiting,
        "vgprs_allocated": alloc,
        "block_size": block_size,
    }


def occupancy_nvidia(
    profile: TargetProfile, registers: int, shared_bytes: int = 0, block_size: int = 256
) -> dict[str, Any]:
    """Resident warps per SM for a block size, by registers, shared memory and slots."""
    warps_per_block = max(1, math.ceil(block_size / profile.wave_size))
    regs_per_warp = _round_up(max(registers, 1) * profile.wave_size, profile.register_granule_per_wave)
    blocks = {
        "hardware": min(profile.max_blocks_per_cu, profile.max_waves_per_cu // warps_per_block),
        "registers": profile.registers_per_cu // (regs_per_warp * warps_per_block),
    }
    if shared_bytes:
        per_block = shared_bytes + profile.shared_memory_reserved_per_block
        blocks["shared_memory"] = (profile.shared_memory_per_cu_kb * 1024) // per_block
    active = min(blocks.values())
    hardware = blocks["hardware"]
    limiting = ["hardware"] if active == hardware else sorted(k for k, v in blocks.items() if v == active)
    return {
        "warps_per_sm": active * warps_per_block,
        "max_warps_per_sm": profile.max_waves_per_cu,
        "blocks_per_sm": active,
        "limits_blocks": blocks,
        "limited_by": limiting,
        "block_size": block_size,
    }


# -- the CPU -------------------------------------------------------------------


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
    log.info("measured the CPU profile of %s", model)
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
