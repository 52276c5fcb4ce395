"""The static report of a kernel build: data model, cache and shared helpers.

`static_amd` fills it from the AMDGPU compiler (MI300 ISA), `static_nvidia` from
nvcc/ptxas and SASS; `static_analysis` finds the kernel source inside a Python
submission and picks the vendor. Worker side: stdlib, PyYAML and our modules only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sandbox import buildcache
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
    def from_dict(cls, data: dict[str, Any]) -> StaticReport:
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
    return {n: d for n, d in zip(names, out, strict=False) if d != n}


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


TORCH_STUB_NOTE = "host code was parsed against a stand-in for the torch headers"


def torch_stub(source: str, folder: Path) -> tuple[list[str], list[str]]:
    """Include folders and compiler flags that stand in for torch's headers, if the source needs them.

    load_inline puts torch's headers before the source; the stand-in takes their place
    (both compilers need `-I` and `-include`). Empty lists when the source uses no torch.
    """
    if _USES_TORCH.search(source) is None:
        return [], []
    folder.mkdir(parents=True, exist_ok=True)
    return [str(_torch_stub_dir(folder))], ["-include", "ks_torch_stub.h"]


