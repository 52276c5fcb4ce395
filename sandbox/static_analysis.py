"""Static resource reports for kernels, built without a GPU.

AMD (HIP): the candidate's device code is compiled for the MI300 ISA (gfx942,
or gfx940 where the compiler is older; `sandbox.hip`) to assembly with
`-Rpass-analysis=kernel-resource-usage`. The compiler's remarks give SGPRs,
VGPRs, AGPRs, scratch, spills, LDS and occupancy per kernel; the assembly's
`.amdgpu_metadata` block confirms them and gives the workgroup size the
compiler assumed; the instruction stream gives MFMA and memory instruction
counts.

NVIDIA (CUDA): the source is compiled to a cubin for sm_90a with
`-Xptxas -v` (registers, shared memory, stack, spills, barriers) and
disassembled with `cuobjdump --dump-sass` for HMMA/HGMMA/QGMMA and the widths
of global loads and stores.

Compile errors come back as diagnostics (file, line, column, severity,
message); for source extracted from a Python submission the line numbers point
into that file. Reports are plain dataclasses with `to_dict()`, cached by
source, flags and compiler version.

Worker side: the standard library and PyYAML only.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from sandbox import buildcache, hip, targets
from sandbox.native import parse_diagnostics

log = logging.getLogger(__name__)

# Bump when the report's content changes, so cached reports are redone.
REPORT_VERSION = "1"
_LOG_LIMIT = 20_000


# -- the report ----------------------------------------------------------------


@dataclass
class KernelStatic:
    """What the compiler says about one kernel. Fields that do not apply stay None."""

    name: str  # the symbol
    demangled: str = ""
    # AMD, per wave
    sgprs: int | None = None
    vgprs: int | None = None  # arch VGPRs
    agprs: int | None = None  # accumulation VGPRs (MFMA results)
    sgpr_spills: int | None = None
    vgpr_spills: int | None = None
    # NVIDIA, per thread
    registers: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    barriers: int | None = None
    # both
    scratch_bytes: int | None = None  # AMD: private memory per lane; NVIDIA: stack frame per thread
    shared_bytes: int | None = None  # static LDS / shared memory per block
    max_block_size: int | None = None  # AMD: the workgroup size the compiler assumed
    occupancy: int | None = None  # waves per SIMD (AMD, compiler's) / warps per SM (NVIDIA)
    occupancy_unit: str = ""
    occupancy_detail: dict[str, Any] = field(default_factory=dict)
    instruction_count: int = 0
    instructions: dict[str, int] = field(default_factory=dict)  # by category
    opcodes: dict[str, int] = field(default_factory=dict)  # notable opcodes: matrix, memory by width
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """One line for prompts."""
        label = self.demangled or self.name
        parts: list[str] = []
        if self.vgprs is not None:
            parts.append(f"VGPR {self.vgprs}, AGPR {self.agprs or 0}, SGPR {self.sgprs}")
            parts.append(f"scratch {self.scratch_bytes or 0} B/lane")
            parts.append(f"LDS {self.shared_bytes or 0} B")
            parts.append(f"spills VGPR {self.vgpr_spills or 0} SGPR {self.sgpr_spills or 0}")
        if self.registers is not None:
            parts.append(f"{self.registers} regs/thread")
            parts.append(f"smem {self.shared_bytes or 0} B")
            parts.append(f"stack {self.scratch_bytes or 0} B")
            parts.append(f"spills {self.spill_store_bytes or 0}/{self.spill_load_bytes or 0} B st/ld")
        if self.occupancy is not None:
            limited = self.occupancy_detail.get("limited_by")
            extra = f" (limited by {', '.join(limited)})" if limited and limited != ["hardware"] else ""
            parts.append(f"occupancy {self.occupancy} {self.occupancy_unit}{extra}")
        top = sorted(self.opcodes.items(), key=lambda kv: -kv[1])[:8]
        if top:
            parts.append("ops " + ", ".join(f"{k} x{v}" for k, v in top))
        parts.append(f"{self.instruction_count} instructions")
        return f"{label}: " + "; ".join(parts)


@dataclass
class StaticReport:
    vendor: str  # amd | nvidia
    status: str  # ok | compile_error | unavailable | no_source
    arch_requested: str = ""
    arch_used: str = ""
    compiler: str = ""
    kernels: list[KernelStatic] = field(default_factory=list)
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0
    source_name: str = ""  # e.g. "submission.py:HIP_KERNELS"
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def kernel(self, needle: str) -> KernelStatic | None:
        """The first kernel whose symbol or demangled name contains `needle`."""
        return next((k for k in self.kernels if needle in k.name or needle in k.demangled), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StaticReport":
        data = dict(data)
        data["kernels"] = [KernelStatic(**k) for k in data.get("kernels", [])]
        return cls(**data)

    def summary(self) -> str:
        """A few lines for the Critic and the Coder."""
        head = f"static report ({self.vendor}, {self.arch_used or self.arch_requested or '?'}): {self.status}"
        lines = [head, *self.notes]
        lines += [k.line() for k in self.kernels]
        for diag in self.diagnostics[:10]:
            lines.append(f"{diag['file']}:{diag['line']}: {diag['severity']}: {diag['message']}")
        return "\n".join(lines)


# -- cache -----------------------------------------------------------------------


def _cache_path(key: str) -> Path:
    folder = buildcache.cache_root().parent / "static"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key}.json"


def _cache_load(key: str) -> StaticReport | None:
    try:
        report = StaticReport.from_dict(json.loads(_cache_path(key).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    report.cached = True
    return report


def _cache_store(key: str, report: StaticReport) -> None:
    path = _cache_path(key)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(report.to_dict()))
        os.replace(tmp, path)
    except OSError as exc:  # a cache we cannot write is only slower
        log.debug("static report cache not written: %s", exc)


# -- shared helpers ----------------------------------------------------------------


def _demangle(names: Sequence[str]) -> dict[str, str]:
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if not tool or not names:
        return {}
    try:
        out = subprocess.run(
            [tool], input="\n".join(names), capture_output=True, text=True, timeout=30
        ).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {n: d for n, d in zip(names, out) if d != n}


LineMap = Callable[[int], "tuple[str, int] | None"]


def _diagnostics(log_text: str) -> list[dict[str, Any]]:
    return [
        {"file": d.file, "line": d.line, "column": d.column, "severity": d.severity, "message": d.message}
        for d in parse_diagnostics(log_text)
    ]


def _finish(
    report: StaticReport, source_file: str, line_map: LineMap | None, source_name: str
) -> StaticReport:
    """Point diagnostics in the compiled file back at the submission's lines."""
    report.source_name = source_name or report.source_name
    if line_map is None:
        return report
    for item in report.diagnostics:
        if Path(item["file"]).name == source_file:
            mapped = line_map(item["line"])
            if mapped is not None:
                item["file"], item["line"] = mapped
    return report


# -- torch stand-in for launchers in the kernel string ---------------------------
#
# Competition-style sources keep their torch launcher beside the kernels, and
# load_inline supplies the headers. The real headers take 20 s and more to
# parse and often do not build with another toolchain (a CPU torch's headers
# under hipcc want thrust), so a device-only compile gets declarations of the
# commonly used API instead: host functions are parsed, never code-generated.

_TORCH_STUB = r"""
#pragma once
#include <cstdint>
#include <vector>
#if defined(__HIP__)
#include <hip/hip_runtime.h>
typedef hipStream_t ks_stream_t;
#else
#include <cuda_runtime.h>
typedef cudaStream_t ks_stream_t;
#endif
namespace c10 {
enum class ScalarType : int8_t {
  Byte, Char, Short, Int, Long, Half, Float, Double, Bool, BFloat16,
  Float8_e4m3fn, Float8_e4m3fnuz, Float8_e5m2, Float8_e5m2fnuz
};
struct Half { uint16_t x; };
struct BFloat16 { uint16_t x; };
struct Float8_e4m3fn { uint8_t x; };
struct Float8_e4m3fnuz { uint8_t x; };
struct Float8_e5m2 { uint8_t x; };
struct Float8_e5m2fnuz { uint8_t x; };
struct Device { int index() const; bool is_cuda() const; };
using IntArrayRef = std::vector<int64_t>;
struct TensorOptions {
  TensorOptions dtype(ScalarType) const;
  TensorOptions device(Device) const;
  ScalarType dtype() const;
};
}  // namespace c10
namespace at {
using c10::BFloat16; using c10::Device; using c10::Half; using c10::IntArrayRef;
using c10::ScalarType; using c10::TensorOptions;
class Tensor {
 public:
  void* data_ptr() const;
  template <typename T> T* data_ptr() const;
  template <typename T> T* mutable_data_ptr() const;
  template <typename T> const T* const_data_ptr() const;
  int64_t numel() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t element_size() const;
  IntArrayRef sizes() const;
  IntArrayRef strides() const;
  bool is_contiguous() const;
  bool is_cuda() const;
  bool defined() const;
  ScalarType scalar_type() const;
  TensorOptions options() const;
  Device device() const;
  Tensor contiguous() const;
  Tensor view(IntArrayRef) const;
  Tensor reshape(IntArrayRef) const;
  Tensor t() const;
  Tensor transpose(int64_t, int64_t) const;
  Tensor to(ScalarType) const;
  Tensor zero_() const;
  Tensor fill_(double) const;
  Tensor copy_(const Tensor&) const;
};
Tensor empty(IntArrayRef, TensorOptions = {});
Tensor zeros(IntArrayRef, TensorOptions = {});
Tensor empty_like(const Tensor&, TensorOptions = {});
Tensor zeros_like(const Tensor&, TensorOptions = {});
constexpr ScalarType kByte = ScalarType::Byte, kUInt8 = ScalarType::Byte;
constexpr ScalarType kInt = ScalarType::Int, kInt32 = ScalarType::Int;
constexpr ScalarType kLong = ScalarType::Long, kInt64 = ScalarType::Long;
constexpr ScalarType kHalf = ScalarType::Half, kFloat16 = ScalarType::Half;
constexpr ScalarType kFloat = ScalarType::Float, kFloat32 = ScalarType::Float;
constexpr ScalarType kBFloat16 = ScalarType::BFloat16;
constexpr ScalarType kFloat8_e4m3fn = ScalarType::Float8_e4m3fn;
constexpr ScalarType kFloat8_e4m3fnuz = ScalarType::Float8_e4m3fnuz;
struct StreamStub { operator ks_stream_t() const; ks_stream_t stream() const; };
namespace cuda { StreamStub getCurrentCUDAStream(int device = -1); }
namespace hip {
StreamStub getCurrentHIPStream(int device = -1);
StreamStub getCurrentHIPStreamMasqueradingAsCUDA(int device = -1);
}
}  // namespace at
namespace c10 {
namespace cuda { struct CUDAGuard { explicit CUDAGuard(int); explicit CUDAGuard(Device); }; }
namespace hip { struct HIPGuard { explicit HIPGuard(int); explicit HIPGuard(Device); }; }
}  // namespace c10
namespace torch { using namespace at; }
#define TORCH_CHECK(cond, ...) ((void)(cond))
#define TORCH_INTERNAL_ASSERT(cond, ...) ((void)(cond))
#define AT_ASSERT(cond, ...) ((void)(cond))
"""

_STUBBED_HEADERS = (
    "torch/extension.h", "torch/types.h", "torch/all.h", "torch/torch.h", "ATen/ATen.h",
    "ATen/cuda/CUDAContext.h", "ATen/hip/HIPContext.h", "c10/cuda/CUDAGuard.h",
    "c10/cuda/CUDAStream.h", "c10/hip/HIPGuard.h", "c10/hip/HIPStream.h",
)
_USES_TORCH = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10)/|\b(?:torch|at|c10)::")


def _torch_stub_dir(folder: Path) -> Path:
    (folder / "ks_torch_stub.h").write_text(_TORCH_STUB)
    for header in _STUBBED_HEADERS:
        path = folder / header
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('#pragma once\n#include "ks_torch_stub.h"\n')
    return folder


# -- AMD: remarks, metadata, assembly ----------------------------------------------

_REMARK = re.compile(r"remark:\s*(?P<body>.*?)\s*\[-Rpass-analysis=kernel-resource-usage\]")
_REMARK_KEYS = {
    "sgprs": "sgprs",
    "vgprs": "vgprs",
    "agprs": "agprs",
    "scratchsize": "scratch_bytes",
    "occupancy": "occupancy",
    "sgprs spill": "sgpr_spills",
    "vgprs spill": "vgpr_spills",
    "lds size": "shared_bytes",
    "dynamic stack": "dynamic_stack",
}


def parse_resource_remarks(log_text: str) -> dict[str, dict[str, Any]]:
    """`-Rpass-analysis=kernel-resource-usage` remarks, by function symbol."""
    found: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in log_text.splitlines():
        match = _REMARK.search(line)
        if not match:
            continue
        key, _, value = match.group("body").partition(":")
        key, value = key.strip(), value.strip()
        if key == "Function Name":
            current = found.setdefault(value, {})
            continue
        if current is None:
            continue
        norm = re.sub(r"\s*\[.*?\]", "", key).strip().lower()
        field_name = _REMARK_KEYS.get(norm)
        if field_name is None:
            continue
        if value.lower() in ("true", "false"):
            current[field_name] = value.lower() == "true"
        else:
            try:
                current[field_name] = int(value)
            except ValueError:
                current[field_name] = value
    return found


def parse_amdgpu_metadata(asm: str) -> dict[str, dict[str, Any]]:
    """The code object's kernel metadata (YAML in the assembly), by kernel symbol."""
    match = re.search(r"\.amdgpu_metadata\s*\n(.*?)\n\s*\.end_amdgpu_metadata", asm, re.S)
    if not match:
        return {}
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        log.warning("unreadable amdgpu metadata: %s", exc)
        return {}
    kernels = (data or {}).get("amdhsa.kernels") or []
    return {str(k.get(".name")): k for k in kernels if isinstance(k, dict)}


_AMD_MNEMONIC = re.compile(r"^([a-z][a-z0-9_]*)\b")
_AMD_FUNCTION = re.compile(r"^\.type\s+([^,\s]+)\s*,\s*@function")


def split_amdgcn_functions(asm: str) -> dict[str, list[str]]:
    """Instruction mnemonics of each function in AMDGPU assembly."""
    functions: dict[str, list[str]] = {}
    declared: set[str] = set()
    current: list[str] | None = None
    for raw in asm.splitlines():
        line = raw.split(";", 1)[0].strip()
        if not line:
            continue
        typed = _AMD_FUNCTION.match(line)
        if typed:
            declared.add(typed.group(1))
            continue
        if line.endswith(":"):
            label = line[:-1]
            if label in declared:
                current = functions.setdefault(label, [])
            elif label.startswith(".Lfunc_end"):
                current = None
            continue
        if current is None or line.startswith("."):
            continue
        match = _AMD_MNEMONIC.match(line)
        if match:
            current.append(match.group(1))
    return functions


def classify_amdgcn(mnemonics: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Counts by category, and counts of the opcodes worth naming."""
    cats: dict[str, int] = {}
    ops: dict[str, int] = {}

    def bump(table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    for m in mnemonics:
        notable = False
        if m.startswith(("v_mfma", "v_smfmac")):
            cat, notable = "mfma", True
        elif m.startswith(("global_load", "buffer_load", "flat_load")):
            cat, notable = "vmem_load", True
        elif m.startswith(("global_store", "buffer_store", "flat_store")):
            cat, notable = "vmem_store", True
        elif m.startswith(("global_atomic", "buffer_atomic", "flat_atomic")):
            cat, notable = "atomic", True
        elif m.startswith("scratch_"):
            cat, notable = "scratch", True
        elif m.startswith("ds_"):
            cat, notable = "lds", True
        elif m.startswith(("s_load", "s_buffer_load", "s_store", "s_buffer_store")):
            cat = "smem"
        elif m.startswith("s_waitcnt"):
            cat = "waitcnt"
        elif m == "s_barrier":
            cat, notable = "barrier", True
        elif m.startswith(("s_branch", "s_cbranch", "s_setpc", "s_swappc")):
            cat = "branch"
        elif m.startswith("v_accvgpr"):
            cat, notable = "accvgpr_move", True
        elif m.startswith("v_"):
            cat = "valu"
            notable = ("fp8" in m or "bf8" in m or m.startswith("v_dot"))
        elif m.startswith("s_"):
            cat = "salu"
        else:
            cat = "other"
        bump(cats, cat)
        if notable:
            bump(ops, m)
    return cats, ops


def analyze_hip(
    source: str,
    name: str = "kernel",
    *,
    arch: str | None = None,
    flags: Sequence[str] = (),
    profile: str = "mi300x",
    line_map: LineMap | None = None,
    source_name: str = "",
    use_cache: bool = True,
) -> StaticReport:
    """Compile HIP device code for the MI300 ISA and report each kernel's resources."""
    target = targets.PROFILES[profile]
    hipcc = hip.find_hipcc()
    if hipcc is None:
        return StaticReport(
            vendor="amd", status="unavailable", arch_requested=target.arch, source_name=source_name,
            notes=["hipcc not found: no MI300 static report (install Debian's hipcc)"],
        )
    choice = hip.ArchChoice(arch, arch, f"compiled for {arch}") if arch else hip.mi300_arch(hipcc)
    if choice is None:
        return StaticReport(
            vendor="amd", status="unavailable", arch_requested=target.arch, source_name=source_name,
            compiler=hip.hipcc_version(hipcc), notes=["hipcc accepts neither gfx942 nor gfx940"],
        )
    stub = _USES_TORCH.search(source) is not None
    version = hip.hipcc_version(hipcc)
    key = buildcache.cache_key(
        "static-hip", REPORT_VERSION, source, choice.arch, " ".join(flags), version, profile, name
    )
    if use_cache and (hit := _cache_load(key)) is not None:
        return _finish(hit, f"{name}.hip", line_map, source_name)
    with tempfile.TemporaryDirectory(prefix="ks-stub-") as stub_dir:
        includes = [_torch_stub_dir(Path(stub_dir))] if stub else []
        # load_inline puts torch's headers before the source; the stub stands in for them.
        extra = ["-include", "ks_torch_stub.h"] if stub else []
        built = hip.compile_device_asm(
            source, name=name, arch=choice.arch, flags=[*extra, *flags], include_dirs=includes, hipcc=hipcc
        )
    report = StaticReport(
        vendor="amd",
        status="ok" if built.ok else "compile_error",
        arch_requested=choice.requested,
        arch_used=built.arch,
        compiler=version,
        command=built.command,
        log=built.log[-_LOG_LIMIT:],
        seconds=round(built.seconds, 3),
        source_name=source_name,
        notes=[choice.note],
    )
    if stub:
        report.notes.append("host code was parsed against a stand-in for the torch headers")
    report.diagnostics = _diagnostics(built.log)
    if built.ok:
        report.kernels = _amd_kernels(built.log, built.asm, target)
    if use_cache:
        _cache_store(key, report)
    return _finish(report, built.source_file, line_map, source_name)


def _amd_kernels(log_text: str, asm: str, target: targets.TargetProfile) -> list[KernelStatic]:
    remarks = parse_resource_remarks(log_text)
    meta = parse_amdgpu_metadata(asm)
    bodies = split_amdgcn_functions(asm)
    names = list(meta) or list(remarks)
    demangled = _demangle(names)
    kernels = []
    for sym in names:
        rem, md = remarks.get(sym, {}), meta.get(sym, {})
        k = KernelStatic(name=sym, demangled=demangled.get(sym, ""))
        k.sgprs = rem.get("sgprs", md.get(".sgpr_count"))
        k.vgprs = rem.get("vgprs", md.get(".vgpr_count"))
        k.agprs = rem.get("agprs", md.get(".agpr_count", 0))
        k.sgpr_spills = rem.get("sgpr_spills", md.get(".sgpr_spill_count"))
        k.vgpr_spills = rem.get("vgpr_spills", md.get(".vgpr_spill_count"))
        k.scratch_bytes = rem.get("scratch_bytes", md.get(".private_segment_fixed_size"))
        k.shared_bytes = rem.get("shared_bytes", md.get(".group_segment_fixed_size"))
        k.max_block_size = md.get(".max_flat_workgroup_size")
        k.occupancy = rem.get("occupancy")
        k.occupancy_unit = "waves/SIMD"
        if k.vgprs is not None:
            k.occupancy_detail = targets.occupancy_amd(
                target, k.vgprs, k.agprs or 0, k.sgprs or 0, k.shared_bytes or 0, k.max_block_size or 1024
            )
            if k.occupancy is None:
                k.occupancy = k.occupancy_detail["waves_per_simd"]
        body = bodies.get(sym, [])
        k.instruction_count = len(body)
        k.instructions, k.opcodes = classify_amdgcn(body)
        if k.vgpr_spills or k.sgpr_spills:
            k.notes.append(f"spills: {k.vgpr_spills or 0} VGPRs, {k.sgpr_spills or 0} SGPRs to scratch")
        if k.scratch_bytes:
            k.notes.append(f"uses {k.scratch_bytes} bytes/lane of scratch (slow private memory)")
        if rem.get("dynamic_stack") or md.get(".uses_dynamic_stack"):
            k.notes.append("dynamic stack (recursion or variable-size alloca)")
        if "s_swappc" in " ".join(body) or "s_setpc_b64" in body:
            k.notes.append("calls other functions: their instructions are not counted here")
        kernels.append(k)
    return kernels


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
        import nvidia  # namespace package of NVIDIA's wheels

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
    version = buildcache.toolchain_id(nvcc).splitlines()[-1] if buildcache.toolchain_id(nvcc) else ""
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
    stub = _USES_TORCH.search(source) is not None
    started = time.perf_counter()
    sass = ""
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ks-cuda-static-") as work:
        if stub:
            stub_dir = Path(work) / "stub"
            stub_dir.mkdir()
            command += ["-I", str(_torch_stub_dir(stub_dir)), "-include", "ks_torch_stub.h"]
            notes.append("host code was parsed against a stand-in for the torch headers")
        command += [src_name, "-o", f"{name}.cubin"]
        (Path(work) / src_name).write_text(source)
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, timeout=hip.COMPILE_TIMEOUT_S, cwd=work
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
                env = dict(os.environ)
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


# -- sources inside Python submissions ------------------------------------------------

# Where competition-style and native-loader submissions keep their kernels.
HIP_CONSTANTS = ("HIP_KERNELS", "HIP_SRC", "HIP_SOURCE", "KERNELS", "CUDA_SRC", "SOURCE", "KERNEL_SRC", "SRC")
CUDA_CONSTANTS = ("CUDA_KERNELS", "SOURCE", "CUDA_SRC", "CUDA_SOURCE", "KERNEL_SRC", "KERNELS", "SRC")


@dataclass
class ExtractedSource:
    """Kernel source found in a Python file, with where its lines came from."""

    constant: str
    text: str
    file: str
    # (first line in text, number of lines, line in the file of that first line)
    segments: list[tuple[int, int, int]] = field(default_factory=list)

    def location(self, line: int) -> tuple[str, int] | None:
        for first, count, py_line in self.segments:
            if first <= line < first + count:
                return self.file, py_line + (line - first)
        return None


def extract_kernel_source(
    py_text: str, prefer: Sequence[str] = HIP_CONSTANTS, file: str = "submission.py"
) -> ExtractedSource | None:
    """The module-level string constant holding the kernels (it must contain __global__).

    Understands plain string literals, names of earlier constants and `+` of
    these, which covers `CUDA_SRC = HIP_KERNELS + LAUNCHER`. The first name in
    `prefer` that holds a kernel wins, else the longest such constant.
    """
    try:
        tree = ast.parse(py_text)
    except SyntaxError:
        return None
    # Each value: list of (text, line in file of its first line or 0 if unknown).
    values: dict[str, list[tuple[str, int]]] = {}

    def resolve(node: ast.AST) -> list[tuple[str, int]] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [(node.value, node.lineno)]
        if isinstance(node, ast.Name) and node.id in values:
            return values[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = resolve(node.left), resolve(node.right)
            if left is not None and right is not None:
                return left + right
        return None

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
            value = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            names, value = [stmt.target.id], stmt.value
        else:
            continue
        pieces = resolve(value)
        if pieces is not None:
            for n in names:
                values[n] = pieces

    kernels = {n: p for n, p in values.items() if "__global__" in "".join(t for t, _ in p)}
    if not kernels:
        return None
    chosen = next((n for n in prefer if n in kernels), None)
    if chosen is None:
        chosen = max(kernels, key=lambda n: len("".join(t for t, _ in kernels[n])))
    text, segments, line = "", [], 1
    for piece, py_line in kernels[chosen]:
        count = piece.count("\n") + 1
        if py_line:
            segments.append((line, count, py_line))
        text += piece
        line += count - 1
    return ExtractedSource(constant=chosen, text=text, file=file, segments=segments)


def analyze_submission(path: str | Path, target: str, **kwargs: Any) -> StaticReport:
    """The static report of a Python submission for a target ('hip' or 'cuda').

    Finds the kernel source constant (`HIP_KERNELS`, `CUDA_SRC`, `SOURCE`, ...),
    compiles it for the target's ISA and maps diagnostics back to the file.
    """
    path = Path(path)
    vendor = "amd" if target.split(":")[0] in ("hip", "rocm", "amd", "mi300x", "mi325x") else "nvidia"
    prefer = HIP_CONSTANTS if vendor == "amd" else CUDA_CONSTANTS
    try:
        text = path.read_text()
    except OSError as exc:
        return StaticReport(vendor=vendor, status="no_source", notes=[f"cannot read {path}: {exc}"])
    found = extract_kernel_source(text, prefer, file=path.name)
    if found is None:
        return StaticReport(
            vendor=vendor, status="no_source", source_name=path.name,
            notes=["no module-level string constant with a __global__ kernel"],
        )
    label = f"{path.name}:{found.constant}"
    name = re.sub(r"\W", "_", path.stem) or "kernel"
    if vendor == "amd":
        return analyze_hip(found.text, name, line_map=found.location, source_name=label, **kwargs)
    return analyze_cuda(found.text, name, line_map=found.location, source_name=label, **kwargs)
