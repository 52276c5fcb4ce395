"""Static analysis for NVIDIA GPUs: ptxas resource usage and SASS instruction counts."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from sandbox import buildcache, hip, targets
from sandbox.safe_env import safe_env
from sandbox.static_report import (
    _LOG_LIMIT,
    REPORT_VERSION,
    TORCH_STUB_NOTE,
    KernelStatic,
    LineMap,
    StaticReport,
    _cache_load,
    _cache_store,
    _demangle,
    _diagnostics,
    _finish,
    torch_stub,
)

log = logging.getLogger(__name__)

# -- NVIDIA: ptxas -v and SASS --------------------------------------------------------


def find_cuobjdump() -> str | None:
    """cuobjdump beside nvcc, on PATH, or from the nvidia-cuda-cuobjdump wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    nvcc = shutil.which(os.environ.get("NVCC", "nvcc"))
    homes = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    if nvcc:
        homes.insert(0, str(Path(os.path.realpath(nvcc)).parent.parent))
    for home in filter(None, homes):
        beside = Path(home) / "bin" / "cuobjdump"
        if beside.is_file():
            return str(beside)
    try:
        import nvidia  # type: ignore[import-untyped]  # namespace package of NVIDIA's wheels

        for root in getattr(nvidia, "__path__", []):
            for candidate in sorted(Path(root).glob("*/bin/cuobjdump")):
                return str(candidate)
    except ImportError:
        pass
    return None


def parse_ptxas_verbose(log_text: str) -> dict[str, dict[str, int]]:
    """`-Xptxas -v` output, by function symbol (entry functions and device functions)."""
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    patterns = {
        "stack_frame": r"(\d+) bytes stack frame",
        "spill_store_bytes": r"(\d+) bytes spill stores",
        "spill_load_bytes": r"(\d+) bytes spill loads",
        "registers": r"Used (\d+) registers",
        "barriers": r"used (\d+) barriers",
        "smem": r"(\d+) bytes smem",
        "cumulative_stack": r"(\d+) bytes cumulative stack size",
    }
    for line in log_text.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line) or re.search(
            r"Function properties for (\S+)", line
        )
        if entry:
            current = found.setdefault(entry.group(1), {})
            continue
        if current is None:
            continue
        for key, pattern in patterns.items():
            match = re.search(pattern, line)
            if match:
                current[key] = int(match.group(1))
    return found


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def split_sass(text: str) -> dict[str, list[str]]:
    """Opcodes (with modifiers, predicates dropped) of each function in cuobjdump SASS."""
    functions: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        head = re.match(r"\s*Function\s*:\s*(\S+)", line)
        if head:
            current = functions.setdefault(head.group(1), [])
            continue
        if current is None:
            continue
        match = _SASS_LINE.search(line)
        if not match:
            continue
        tokens = match.group(1).split()
        if tokens and tokens[0].startswith("@"):
            tokens = tokens[1:]
        if tokens:
            current.append(tokens[0])
    return functions


_SASS_WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "32": 32, "64": 64, "128": 128}
_SASS_MMA = ("HMMA", "HGMMA", "QGMMA", "IMMA", "IGMMA", "DMMA", "BMMA", "BGMMA", "OMMA", "QMMA")
_SASS_CATS = {
    "LDG": "global_load", "STG": "global_store", "LDS": "shared_load", "STS": "shared_store",
    "LDSM": "ldmatrix", "LDGSTS": "cp_async", "LDL": "local", "STL": "local",
    "ATOM": "atomic", "ATOMG": "atomic", "RED": "atomic", "ATOMS": "atomic",
    "BAR": "barrier", "SYNCS": "mbarrier", "UTMALDG": "tma", "UTMASTG": "tma", "UBLKCP": "tma",
    "MUFU": "mufu", "SHFL": "shuffle", "BRA": "branch", "EXIT": "branch", "RET": "branch",
    "CALL": "branch", "FFMA": "ffma", "FADD": "fadd_fmul", "FMUL": "fadd_fmul", "HFMA2": "hfma2",
}


def classify_sass(opcodes: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Counts by category, and matrix and memory opcodes with their widths."""
    cats: dict[str, int] = {}
    ops: dict[str, int] = {}
    for op in opcodes:
        parts = op.split(".")
        base = parts[0]
        if base in _SASS_MMA:
            cat, key = base.lower(), op
        elif base in ("LDG", "STG", "LDS", "STS", "LDL", "STL", "LDGSTS"):
            width = next((_SASS_WIDTHS[p] for p in parts[1:] if p in _SASS_WIDTHS), 32)
            cat, key = _SASS_CATS[base], f"{base}.{width}"
        elif base in _SASS_CATS:
            cat = _SASS_CATS[base]
            key = base if cat in ("ldmatrix", "atomic", "barrier", "tma", "mbarrier") else ""
        else:
            cat, key = "other", ""
        cats[cat] = cats.get(cat, 0) + 1
        if key:
            ops[key] = ops.get(key, 0) + 1
    return cats, ops


def analyze_cuda(
    source: str,
    name: str = "kernel",
    arch: str = "90a",
    *,
    flags: Sequence[str] = (),
    profile: str = "h100",
    block_size: int = 256,
    line_map: LineMap | None = None,
    source_name: str = "",
    use_cache: bool = True,
) -> StaticReport:
    """Compile CUDA source to a cubin with ptxas' report, and count its SASS.

    Occupancy is given for `block_size` threads per block: the launch
    configuration is not in the source's kernels.
    """
    target = targets.PROFILES[profile]
    nvcc = shutil.which(os.environ.get("NVCC", "nvcc"))
    arch = arch.removeprefix("sm_")
    if nvcc is None:
        return StaticReport(
            vendor="nvidia", status="unavailable", arch_requested=f"sm_{arch}",
            source_name=source_name, notes=["nvcc not found: no CUDA static report"],
        )
    banner = buildcache.toolchain_id(nvcc)
    version = banner.splitlines()[-1] if banner else ""
    key = buildcache.cache_key(
        "static-cuda", REPORT_VERSION, source, arch, " ".join(flags), version, profile, name, str(block_size)
    )
    src_name = f"{name}.cu"
    if use_cache and (hit := _cache_load(key)) is not None:
        return _finish(hit, src_name, line_map, source_name)
    command = [
        nvcc, "-cubin", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-O3", "-std=c++17",
        "-Xptxas", "-v", *flags,
    ]
    started = time.perf_counter()
    sass = ""
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ks-cuda-static-") as work:
        includes, extra = torch_stub(source, Path(work) / "stub")
        if includes:
            command += ["-I", includes[0], *extra]
            notes.append(TORCH_STUB_NOTE)
        command += [src_name, "-o", f"{name}.cubin"]
        (Path(work) / src_name).write_text(source)
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=hip.COMPILE_TIMEOUT_S, cwd=work, env=safe_env()
            )
            ok, output = proc.returncode == 0, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            ok, output = False, "nvcc timed out"
        cubin = Path(work) / f"{name}.cubin"
        if ok and cubin.exists():
            cuobjdump = find_cuobjdump()
            if cuobjdump is None:
                notes.append("cuobjdump not found: no SASS instruction counts")
            else:
                env = safe_env()
                # cuobjdump runs nvdisasm, which the wheels install beside it.
                env["PATH"] = f"{Path(cuobjdump).parent}{os.pathsep}{env.get('PATH', '')}"
                try:
                    dump = subprocess.run(
                        [cuobjdump, "--dump-sass", str(cubin)],
                        capture_output=True, text=True, timeout=120, env=env,
                    )
                    sass = dump.stdout
                    if dump.returncode != 0:
                        notes.append("cuobjdump failed: " + dump.stderr.strip()[-300:])
                except (OSError, subprocess.TimeoutExpired) as exc:
                    notes.append(f"cuobjdump failed: {exc}")
        output = output.replace(work + os.sep, "")
    report = StaticReport(
        vendor="nvidia",
        status="ok" if ok else "compile_error",
        arch_requested=f"sm_{arch}",
        arch_used=f"sm_{arch}",
        compiler=version,
        command=command,
        log=output[-_LOG_LIMIT:],
        seconds=round(time.perf_counter() - started, 3),
        source_name=source_name,
        notes=notes,
        diagnostics=_diagnostics(output),
    )
    if ok:
        report.kernels = _nvidia_kernels(output, sass, target, block_size)
    if use_cache:
        _cache_store(key, report)
    return _finish(report, src_name, line_map, source_name)


def _nvidia_kernels(
    ptxas_log: str, sass: str, target: targets.TargetProfile, block_size: int
) -> list[KernelStatic]:
    info = parse_ptxas_verbose(ptxas_log)
    entries = re.findall(r"Compiling entry function '([^']+)'", ptxas_log)
    bodies = split_sass(sass)
    names = list(dict.fromkeys(entries)) or list(bodies)
    demangled = _demangle(names)
    kernels = []
    for sym in names:
        props = info.get(sym, {})
        k = KernelStatic(name=sym, demangled=demangled.get(sym, ""))
        k.registers = props.get("registers")
        k.shared_bytes = props.get("smem", 0)
        k.scratch_bytes = props.get("stack_frame", 0)
        k.spill_store_bytes = props.get("spill_store_bytes", 0)
        k.spill_load_bytes = props.get("spill_load_bytes", 0)
        k.barriers = props.get("barriers", 0)
        if k.registers is not None:
            k.occupancy_detail = targets.occupancy_nvidia(
                target, k.registers, k.shared_bytes or 0, block_size
            )
            k.occupancy = k.occupancy_detail["warps_per_sm"]
            k.occupancy_unit = f"warps/SM at {block_size} threads/block"
        body = bodies.get(sym, [])
        k.instruction_count = len(body)
        k.instructions, k.opcodes = classify_sass(body)
        if k.spill_store_bytes or k.spill_load_bytes:
            k.notes.append(
                f"spills: {k.spill_store_bytes} bytes stored, {k.spill_load_bytes} bytes loaded "
                "(local memory)"
            )
        elif k.scratch_bytes:
            k.notes.append(f"{k.scratch_bytes} bytes stack frame per thread (local memory)")
        kernels.append(k)
    return kernels


