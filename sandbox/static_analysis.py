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
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.static_amd import (  # noqa: F401 - the public API lives here
    _amd_kernels,
    analyze_hip,
    classify_amdgcn,
    parse_amdgpu_metadata,
    parse_resource_remarks,
    split_amdgcn_functions,
)
from sandbox.static_nvidia import (  # noqa: F401
    analyze_cuda,
    classify_sass,
    find_cuobjdump,
    parse_ptxas_verbose,
    split_sass,
)
from sandbox.static_report import KernelStatic, StaticReport  # noqa: F401

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
    py_text: str, prefer: Sequence[str] = HIP_CONSTANTS, file: str = "submission.py", marker: str = "__global__"
) -> ExtractedSource | None:
    """The module-level string constant holding the kernels (it must contain `marker`: __global__ for
    GPU kernels, `extern "C"` for the CPU's native functions).

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

    kernels = {n: p for n, p in values.items() if marker in "".join(t for t, _ in p)}
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

