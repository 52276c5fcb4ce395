"""The HIP toolchain: find a compiler for the MI300 ISA, compile device code to assembly.

Two uses. On a ROCm host, HIP submissions build as in the competition, through
`torch.utils.cpp_extension.load_inline(..., extra_cuda_cflags=["--offload-arch=gfx942"])`
with `CXX=clang++`; that path is torch's and needs nothing from here beyond
`load_inline_flags()`. On any host with a HIP compiler (no GPU needed), every HIP
candidate is also compiled for the MI300 ISA to assembly (`--cuda-device-only -S`)
with the compiler's resource remarks, which `sandbox.static_analysis` turns into a report.

Two compilers can do that, tried in this order (`$KS_HIP_COMPILER=clang|hipcc` forces one):
- an upstream clang (Debian's `clang-19`), which knows gfx942, the MI300X itself, given a
  device-library folder with a gfx942 ISA library (`sandbox.amdgcn_libs` makes one);
- hipcc. Debian bookworm's (HIP 5.2, clang 15) knows gfx940, the first MI300 target of the
  same CDNA3 ISA family, but not gfx942; a ROCm 6 hipcc knows gfx942.
The chosen `Toolchain` names the compiler and the target, and the report repeats both.
nvcc may be installed too, so HIP_PLATFORM=amd is always set.

Judge side: the standard library only.
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

from sandbox import amdgcn_libs
from sandbox.safe_env import safe_env

log = logging.getLogger(__name__)

HIPCC_ENV = "HIPCC"
CLANG_ENV = "KS_HIP_CLANG"  # a clang++ to use for HIP device code
COMPILER_ENV = "KS_HIP_COMPILER"  # "clang" or "hipcc": use only that one
COMPILE_TIMEOUT_S = float(os.environ.get("KS_HIP_TIMEOUT", "300"))

# The competition's MI300X target first, then the MI300 ISA older compilers know.
MI300_ARCHS: tuple[str, ...] = ("gfx942", "gfx940")
# Upstream clang drivers that may know gfx942, newest first (Debian names them by major version).
CLANG_NAMES: tuple[str, ...] = ("clang++-21", "clang++-20", "clang++-19", "clang++-18", "clang++-17")

# hipcc (the perl driver) appends host link flags even to device-only compiles;
# without this every compile logs a screen of "linker input unused" warnings.
_QUIET = ["-Wno-unused-command-line-argument"]

_PROBE = """
#include <hip/hip_runtime.h>
__global__ void ks_probe(float* out) { out[threadIdx.x] = 1.0f; }
"""


@dataclass(frozen=True)
class Toolchain:
    """A compiler that builds HIP device code for one MI300 target, and how to call it."""

    kind: str  # "clang" (upstream, with our device libraries) or "hipcc"
    compiler: str  # its path
    version: str  # its banner, e.g. "Debian clang version 19.1.7 (3~deb12u1)"
    arch: str  # the target it compiles for
    flags: tuple[str, ...] = ()  # what this compiler needs to compile HIP device code
    note: str = ""  # one line for the report
    requested: str = MI300_ARCHS[0]  # what the target really is (gfx942 for MI300X)

    @property
    def exact(self) -> bool:
        return self.arch == self.requested

    @property
    def label(self) -> str:
        """The compiler as a report names it: 'clang++-19 (Debian clang version 19.1.7 ...)'."""
        return f"{Path(self.compiler).name} ({self.version})" if self.version else Path(self.compiler).name

    def command(self, arch: str | None = None) -> list[str]:
        """The start of a device-only compile for `arch` (default: the toolchain's)."""
        return [self.compiler, *self.flags, f"--offload-arch={arch or self.arch}", "--cuda-device-only"]


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


def _executable(name: str) -> str | None:
    return name if Path(name).is_file() and os.access(name, os.X_OK) else shutil.which(name)


def find_hipcc() -> str | None:
    """$HIPCC, then hipcc on PATH, then ROCm's usual place."""
    forced = os.environ.get(HIPCC_ENV)
    if forced:
        return _executable(forced)
    found = shutil.which("hipcc")
    if found:
        return found
    for candidate in ("/opt/rocm/bin/hipcc", "/opt/rocm/hip/bin/hipcc"):
        if Path(candidate).is_file():
            return candidate
    return None


def find_clang() -> str | None:
    """$KS_HIP_CLANG, else the newest versioned clang++ on PATH (`CLANG_NAMES`)."""
    forced = os.environ.get(CLANG_ENV)
    if forced:
        return _executable(forced)
    return next((found for name in CLANG_NAMES if (found := shutil.which(name))), None)


def hip_env() -> dict[str, str]:
    """The environment HIP compilers run in: AMD platform even where nvcc is installed; no secrets
    (they compile candidate source, which can quote any file it includes)."""
    env = safe_env()
    env["HIP_PLATFORM"] = "amd"
    env.setdefault("HIP_COMPILER", "clang")
    return env


@functools.cache
def compiler_version(compiler: str) -> str:
    """'HIP version: 5.2.21153-0; Debian clang version 15.0.6' for hipcc, the clang line for clang."""
    try:
        # hipcc --version also runs rocm_agent_enumerator, which complains on
        # stderr when there is no GPU: only stdout is the banner.
        out = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=60, env=hip_env()
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


def hipcc_version(hipcc: str | None = None) -> str:
    """hipcc's banner, or '' without hipcc."""
    hipcc = hipcc or find_hipcc()
    return compiler_version(hipcc) if hipcc else ""


def _run(command: list[str], cwd: str, timeout: float) -> tuple[bool | None, str]:
    """(compiled?, output); None when the compiler could not give an answer (timeout, not runnable)."""
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=hip_env()
        )
    except subprocess.TimeoutExpired:
        return None, f"{Path(command[0]).name} timed out after {timeout:.0f} s"
    except OSError as exc:
        return None, f"cannot run {command[0]}: {exc}"
    return proc.returncode == 0, proc.stdout + proc.stderr


def _probe(compiler: str, flags: tuple[str, ...], arch: str) -> tuple[bool | None, str]:
    with tempfile.TemporaryDirectory(prefix="ks-hip-probe-") as work:
        (Path(work) / "probe.hip").write_text(_PROBE)
        command = [compiler, *flags, f"--offload-arch={arch}", "--cuda-device-only", "-S", *_QUIET,
                   "probe.hip", "-o", "probe.s"]
        return _run(command, work, 120)


@functools.cache
def accepts(compiler: str, flags: tuple[str, ...], arch: str) -> tuple[bool, str]:
    """Whether `compiler` with `flags` compiles a one-line kernel for `arch`, and its last words if not.

    Definite answers are kept on disk by compiler, banner, flags and target: judges are
    short-lived, and a probe costs a second or two.
    """
    from sandbox import buildcache  # stdlib-only module; imported late to keep this one light

    key = buildcache.cache_key("hip-accepts", compiler, compiler_version(compiler), *flags, arch)
    path = buildcache.cache_root().parent / f"hip-accepts-{key}.txt"
    try:
        verdict, _, why = path.read_text().partition("\n")
        if verdict in ("yes", "no"):
            return verdict == "yes", why
    except OSError:
        pass
    ok, output = _probe(compiler, flags, arch)
    lines = output.strip().splitlines()
    why = "" if ok else (lines[-1] if lines else "no output")
    if ok is not None:
        try:
            path.write_text(("yes" if ok else "no") + "\n" + why)
        except OSError:
            pass
    if not ok:
        log.info("%s does not compile for %s: %s", compiler, arch, why)
    return bool(ok), why


def clang_toolchain() -> tuple[Toolchain | None, str]:
    """Upstream clang for gfx942 with our device-library folder, or why not."""
    clang = find_clang()
    if clang is None:
        return None, f"no clang++ that knows gfx942 ({', '.join(CLANG_NAMES)}; apt-get install clang-19 llvm-19)"
    try:
        libs = amdgcn_libs.gfx942_device_libs(clang)
    except (amdgcn_libs.DeviceLibError, OSError) as exc:
        return None, f"{Path(clang).name}: {exc}"
    flags = ("-x", "hip", f"--rocm-device-lib-path={libs}")
    ok, why = accepts(clang, flags, MI300_ARCHS[0])
    if not ok:
        return None, f"{Path(clang).name} does not compile for {MI300_ARCHS[0]}: {why}"
    version = compiler_version(clang)
    note = f"compiled for {MI300_ARCHS[0]} (MI300X) with {Path(clang).name} ({version})"
    return Toolchain("clang", clang, version, MI300_ARCHS[0], flags, note), ""


def hipcc_toolchain(why_not_clang: str = "") -> tuple[Toolchain | None, str]:
    """hipcc for gfx942 where it knows it, else gfx940, or why not."""
    hipcc = find_hipcc()
    if hipcc is None:
        return None, "no hipcc (apt-get install hipcc libamdhip64-dev, or ROCm's /opt/rocm/bin/hipcc)"
    version = compiler_version(hipcc)
    requested = MI300_ARCHS[0]
    for arch in MI300_ARCHS:
        if accepts(hipcc, (), arch)[0]:
            if arch == requested:
                note = f"compiled for {arch} (MI300X) with hipcc ({version})"
            else:
                note = (
                    f"compiled for {arch} with hipcc ({version}), which does not know {requested}; "
                    f"{arch} is the same MI300 (CDNA3) ISA family"
                )
            if why_not_clang:
                note += f"; clang not used: {why_not_clang}"
            return Toolchain("hipcc", hipcc, version, arch, (), note), ""
    return None, f"hipcc ({version}) accepts neither {' nor '.join(MI300_ARCHS)}"


@functools.cache
def mi300_toolchain() -> Toolchain | None:
    """The compiler for MI300 device code: clang for gfx942, else hipcc ($KS_HIP_COMPILER picks one)."""
    forced = os.environ.get(COMPILER_ENV, "").strip().lower()
    if forced == "hipcc":
        return hipcc_toolchain()[0]
    chosen, why = clang_toolchain()
    if chosen is not None or forced == "clang":
        return chosen
    return hipcc_toolchain(why)[0]


def toolchain_problem() -> str:
    """Why no MI300 toolchain was found ('' when one was)."""
    if mi300_toolchain() is not None:
        return ""
    reasons = [why for _, why in (clang_toolchain(), hipcc_toolchain())]
    return "; ".join(r for r in reasons if r)


def load_inline_flags(arch: str = "gfx942") -> list[str]:
    """The extra_cuda_cflags of a competition-style HIP build."""
    return [f"--offload-arch={arch}", "-O3", "-std=c++17"]


def compile_device_asm(
    source: str,
    *,
    name: str = "kernel",
    toolchain: Toolchain | None = None,
    arch: str | None = None,
    flags: Sequence[str] = (),
    include_dirs: Sequence[str | Path] = (),
    remarks: bool = True,
    timeout: float = COMPILE_TIMEOUT_S,
) -> DeviceCompile:
    """Compile HIP source for one AMD GPU target to assembly, with resource remarks.

    `toolchain` defaults to `mi300_toolchain()`, `arch` to the toolchain's target. The source
    gets hip_runtime.h force-included, as load_inline's prelude would provide it.
    """
    toolchain = toolchain or mi300_toolchain()
    src_name = f"{name}.hip"
    if toolchain is None:
        why = toolchain_problem() or "no HIP compiler for the MI300 ISA"
        return DeviceCompile(False, arch or "", [], why, "", 0.0, src_name)
    arch = arch or toolchain.arch
    command = [*toolchain.command(arch), "-S", "-O3", "-std=c++17", "-include", "hip/hip_runtime.h", *_QUIET]
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
    log.debug("%s %s for %s: ok=%s in %.2f s", toolchain.kind, name, arch, ok, seconds)
    return DeviceCompile(bool(ok), arch, command, output, asm, seconds, src_name)
