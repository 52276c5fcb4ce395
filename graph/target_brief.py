"""The facts of the target brief: the host's instruction set and caches, the chip's limits, the
exact build command, and a cache-aware roofline.

The graph reads these (the host's /proc and /sys, the sandbox's toolchain) and hands the roles
plain text in the ProblemView; the roles never read the machine themselves.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import BaseModel, Field

from sandbox.targets import TargetProfile

log = logging.getLogger(__name__)

# Instruction-set flags worth a kernel writer's attention, in the order they are listed (x86, then Arm).
ISA_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
    "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "bf16", "i8mm",
)
_VECTOR_BITS = (("avx512f", 512), ("avx", 256), ("sse4_2", 128), ("asimd", 128))


class HostFacts(BaseModel):
    """What the CPU target's host offers, read once from /proc/cpuinfo and /sys."""

    model: str = ""
    flags: str = Field(default="", description="The cpuinfo flags (x86) or Features (Arm) line.")
    threads: int = 1  # usable by this process
    cores: int | None = None  # physical cores per socket, when cpuinfo says
    caches: dict[str, int] = Field(default_factory=dict, description="L1d, L2, L3 sizes in bytes.")

    def isa(self) -> list[str]:
        present = set(self.flags.split())
        return [f for f in ISA_FLAGS if f in present]

    def vector_bits(self) -> int:
        present = set(self.flags.split())
        return next((bits for flag, bits in _VECTOR_BITS if flag in present), 0)


def _cpuinfo_field(text: str, *names: str) -> str:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in names:
            return value.strip()
    return ""


def _size_bytes(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * factor if digits.isdigit() else 0


def _caches(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[str, int]:
    caches: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except OSError:
            continue
        if kind == "Instruction" or not size:
            continue
        caches[f"L{level}d" if kind == "Data" else f"L{level}"] = size
    return caches


def read_host(cpuinfo: Path = Path("/proc/cpuinfo")) -> HostFacts:
    """This machine's CPU; missing files give empty fields, never an error (the brief is an aid)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    cores = _cpuinfo_field(text, "cpu cores")
    try:
        threads = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        threads = os.cpu_count() or 1
    return HostFacts(
        model=_cpuinfo_field(text, "model name", "Model"),
        flags=_cpuinfo_field(text, "flags", "Features"),
        threads=threads,
        cores=int(cores) if cores.isdigit() else None,
        caches=_caches(),
    )


def _mb(size: int) -> str:
    return f"{size / 1024**2:g} MB" if size >= 1024**2 else f"{size // 1024} KB"


def cpu_hardware(profile: TargetProfile | None, host: HostFacts) -> str:
    """The CPU's lines: model, instruction set, threads, caches, measured peaks."""
    lines = [f"CPU {host.model or (profile.arch if profile else 'unknown')}"]
    isa = host.isa()
    if isa:
        lines.append(f"instruction set: {' '.join(isa)} ({host.vector_bits()}-bit vectors)")
    cores = f" ({host.cores} physical cores)" if host.cores else ""
    lines.append(f"{host.threads} threads usable{cores}")
    if host.caches:
        lines.append("caches: " + ", ".join(f"{name} {_mb(size)}" for name, size in host.caches.items()))
    if profile is not None:
        lines.append(
            f"measured: fp32 {profile.peak_tflops.get('fp32', 0) * 1000:.0f} GFLOP/s, "
            f"DRAM {profile.memory_tbps * 1000:.0f} GB/s"
        )
    return "\n".join(f"- {line}" for line in lines)


def gpu_hardware(profile: TargetProfile) -> str:
    """The GPU's lines: architecture, compute units, registers, shared memory/LDS, matrix units, peaks."""
    unit, shared = ("CUs", "LDS") if profile.vendor == "amd" else ("SMs", "shared memory")
    peaks = ", ".join(f"{k} {v:g}" for k, v in profile.peak_tflops.items())
    lines = [
        f"{profile.name} ({profile.arch}): {profile.compute_units} {unit}, wave size {profile.wave_size}",
        f"registers: up to {profile.registers_per_lane} per lane"
        + (f", {profile.registers_per_cu} per SM" if profile.registers_per_cu else "")
        + (f", {profile.vgprs_per_simd} VGPRs per SIMD lane" if profile.vgprs_per_simd else ""),
        f"{shared}: {profile.shared_memory_kb} KB per block, {profile.shared_memory_per_cu_kb} KB per "
        f"{unit[:-1]}; L2 {profile.l2_mb:g} MB" + (f", Infinity Cache {profile.l3_mb:g} MB" if profile.l3_mb else ""),
        f"peaks TFLOP/s: {peaks}; memory {profile.memory_tbps} TB/s",
    ]
    if profile.notes:
        lines.append(f"matrix units and notes: {profile.notes}")
    return "\n".join(f"- {line}" for line in lines)


def cache_fit(nbytes: float | None, host: HostFacts | None) -> str:
    """Where a shape's working set fits on the CPU: the DRAM speed of light bounds only what does not fit."""
    if not nbytes or host is None or not host.caches:
        return ""
    for name in ("L2", "L3"):
        size = host.caches.get(name)
        if size and nbytes <= size:
            return f"fits in {name}: not DRAM-bound"
    return "larger than the last cache: DRAM-bound"


def build_command(target: str) -> str:
    """The exact command a submission's kernel is built with through the sandbox's loader."""
    from sandbox import native

    try:
        if target == "cpu":
            chain = native._toolchain("cpp", (), openmp=True)
            return f"load_cpp(source, flags=[...]) runs: {chain.compiler} {' '.join(chain.flags)} [flags]"
        if target == "cuda":
            chain = native._toolchain("cuda", (), openmp=False)
            return f"load_cuda(source, flags=[...]) runs: {chain.compiler} {' '.join(chain.flags)} [flags]"
    except Exception as exc:  # no GPU visible here: the judge's side knows its architecture
        log.info("no build command for the brief: %s", exc)
        return ""
    if target == "hip":
        return "torch.utils.cpp_extension.load_inline(..., extra_cuda_cflags=['--offload-arch=gfx942', ...])"
    return ""
