"""The HIP toolchain: find hipcc, pick the MI300 ISA it knows, compile device code.

Two uses. On a ROCm host, HIP submissions build as in the competition, through
`torch.utils.cpp_extension.load_inline(..., extra_cuda_cflags=["--offload-arch=gfx942"])`
with `CXX=clang++`; that path is torch's and needs nothing from here beyond
`load_inline_flags()`. On any host with a hipcc (Debian's `hipcc` package is
enough, no GPU), every HIP candidate is also compiled for the MI300 ISA to
assembly (`--cuda-device-only -S`) with the compiler's resource remarks, which
`sandbox.static_analysis` turns into a report.

Debian bookworm's hipcc (HIP 5.2, clang 15) knows gfx940, the first MI300 target
of the same CDNA3 ISA family, but not gfx942: `mi300_arch()` asks the compiler
once and says which one it used. nvcc may be installed too, so HIP_PLATFORM=amd
is always set for hipcc.

Worker side: the standard library only.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

HIPCC_ENV = "HIPCC"
COMPILE_TIMEOUT_S = float(os.environ.get("KS_HIP_TIMEOUT", "300"))

# The competition's MI300X target first, then the MI300 ISA older compilers know.
MI300_ARCHS: tuple[str, ...] = ("gfx942", "gfx940")

# hipcc (the perl driver) appends host link flags even to device-only compiles;
# without this every compile logs a screen of "linker input unused" warnings.
_QUIET = ["-Wno-unused-command-line-argument"]

_PROBE = """
#include <hip/hip_runtime.h>
__global__ void ks_probe(float* out) { out[threadIdx.x] = 1.0f; }
"""


@dataclass(frozen=True)
class ArchChoice:
    arch: str  # what the compiler was given
    requested: str  # what the target really is (gfx942 for MI300X)
    note: str  # one line for the report

    @property
    def exact(self) -> bool:
        return self.arch == self.requested


@dataclass
class DeviceCompile:
    """One device-only compile to assembly."""

    ok: bool
    arch: str
    command: list[str]
    log: str  # compiler stderr/stdout (remarks, warnings, errors)
    asm: str  # the device assembly, "" on failure
    seconds: float
    source_file: str  # the file name used in the log's diagnostics
    extra: dict[str, str] = field(default_factory=dict)


def find_hipcc() -> str | None:
    """$HIPCC, then hipcc on PATH, then ROCm's usual place."""
    forced = os.environ.get(HIPCC_ENV)
    if forced:
        return forced if shutil.which(forced) or Path(forced).is_file() else None
    found = shutil.which("hipcc")
    if found:
        return found
    for candidate in ("/opt/rocm/bin/hipcc", "/opt/rocm/hip/bin/hipcc"):
        if Path(candidate).is_file():
            return candidate
    return None


def hip_env() -> dict[str, str]:
    """The environment hipcc runs in: AMD platform even where nvcc is installed."""
    env = dict(os.environ)
    env["HIP_PLATFORM"] = "amd"
    env.setdefault("HIP_COMPILER", "clang")
    return env


@functools.cache
def hipcc_version(hipcc: str | None = None) -> str:
    """'HIP version: 5.2.21153-0; Debian clang version 15.0.6', or '' without hipcc."""
    hipcc = hipcc or find_hipcc()
    if not hipcc:
        return ""
    try:
        # hipcc --version also runs rocm_agent_enumerator, which complains on
        # stderr when there is no GPU: only stdout is the banner.
        out = subprocess.run(
            [hipcc, "--version"], capture_output=True, text=True, timeout=60, env=hip_env()
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable: {exc}"
    wanted = [
        line.strip()
        for line in out.splitlines()
        if line.startswith("HIP version") or "clang version" in line
    ]
    if wanted:
        return "; ".join(wanted)
    return out.strip().splitlines()[0] if out.strip() else ""


def _run(command: list[str], cwd: str, timeout: float) -> tuple[bool, str]:
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=hip_env()
        )
    except subprocess.TimeoutExpired:
        return False, f"hipcc timed out after {timeout:.0f} s"
    except OSError as exc:
        return False, f"cannot run {command[0]}: {exc}"
    return proc.returncode == 0, proc.stdout + proc.stderr


@functools.cache
def _accepts(hipcc: str, arch: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="ks-hip-probe-") as work:
        (Path(work) / "probe.hip").write_text(_PROBE)
        ok, output = _run(
            [hipcc, f"--offload-arch={arch}", "--cuda-device-only", "-S", *_QUIET,
             "probe.hip", "-o", "probe.s"],
            work,
            120,
        )
    if not ok:
        log.info("hipcc does not accept %s: %s", arch, output.strip().splitlines()[-1:] or output)
    return ok


def _known_arch(hipcc: str) -> str | None:
    """The arch a previous process found for this compiler (workers are short-lived)."""
    from sandbox import buildcache  # stdlib-only module; imported late to keep this one light

    key = buildcache.cache_key(hipcc, hipcc_version(hipcc))
    path = buildcache.cache_root().parent / f"hip-arch-{key}.txt"
    try:
        arch = path.read_text().strip()
        if arch in MI300_ARCHS:
            return arch
    except OSError:
        pass
    for arch in MI300_ARCHS:
        if _accepts(hipcc, arch):
            try:
                path.write_text(arch)
            except OSError:
                pass
            return arch
    return None


def mi300_arch(hipcc: str | None = None) -> ArchChoice | None:
    """The MI300 target this hipcc can compile for: gfx942, else gfx940."""
    hipcc = hipcc or find_hipcc()
    if not hipcc:
        return None
    requested = MI300_ARCHS[0]
    found = _known_arch(hipcc)
    for arch in MI300_ARCHS:
        if arch == found:
            if arch == requested:
                note = f"compiled for {arch} (MI300X)"
            else:
                note = (
                    f"compiled for {arch}: this hipcc ({hipcc_version(hipcc)}) does not know "
                    f"{requested}; {arch} is the same MI300 (CDNA3) ISA family"
                )
            return ArchChoice(arch=arch, requested=requested, note=note)
    return None


def load_inline_flags(arch: str = "gfx942") -> list[str]:
    """The extra_cuda_cflags of a competition-style HIP build."""
    return [f"--offload-arch={arch}", "-O3", "-std=c++17"]


def compile_device_asm(
    source: str,
    *,
    name: str = "kernel",
    arch: str | None = None,
    flags: Sequence[str] = (),
    include_dirs: Sequence[str | Path] = (),
    remarks: bool = True,
    hipcc: str | None = None,
    timeout: float = COMPILE_TIMEOUT_S,
) -> DeviceCompile:
    """Compile HIP source for one AMD GPU target to assembly, with resource remarks.

    `arch` defaults to the MI300 target this compiler knows. The source gets
    hip_runtime.h force-included, as load_inline's prelude would provide it.
    """
    hipcc = hipcc or find_hipcc()
    if not hipcc:
        return DeviceCompile(False, arch or "", [], "hipcc not found", "", 0.0, f"{name}.hip")
    if arch is None:
        choice = mi300_arch(hipcc)
        if choice is None:
            return DeviceCompile(
                False, "", [], "hipcc accepts neither gfx942 nor gfx940", "", 0.0, f"{name}.hip"
            )
        arch = choice.arch
    src_name = f"{name}.hip"
    command = [
        hipcc,
        f"--offload-arch={arch}",
        "--cuda-device-only",
        "-S",
        "-O3",
        "-std=c++17",
        "-include",
        "hip/hip_runtime.h",
        *_QUIET,
    ]
    if remarks:
        command.append("-Rpass-analysis=kernel-resource-usage")
    for inc in include_dirs:
        command += ["-I", str(inc)]
    command += [*flags, src_name, "-o", f"{name}.s"]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ks-hip-") as work:
        (Path(work) / src_name).write_text(source)
        ok, output = _run(command, work, timeout)
        asm_path = Path(work) / f"{name}.s"
        asm = asm_path.read_text(errors="replace") if ok and asm_path.exists() else ""
        output = output.replace(work + os.sep, "")
    seconds = time.perf_counter() - started
    log.debug("hipcc %s for %s: ok=%s in %.2f s", name, arch, ok, seconds)
    return DeviceCompile(ok, arch, command, output, asm, seconds, src_name)
