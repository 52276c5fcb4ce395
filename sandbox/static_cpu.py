"""What the C++ compiler did with a CPU candidate's loops: which it vectorised, with what width,
and why it left the others scalar.

A CPU kernel's speed turns on vectorisation more than on anything a static count could show,
and the times alone do not say whether a loop stayed scalar. The native source (the module-level
string with an `extern "C"` function, as `sandbox.native.load_cpp` builds it) is compiled with the
build's own flags and GCC's `-fopt-info-vec-optimized`/`-fopt-info-vec-missed`, inside the
candidate's sandbox, and the remarks are mapped back to lines of the Python file.

Worker side: the standard library only.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.static_analysis import extract_kernel_source

CPU_CONSTANTS = ("SOURCE", "CPP_SRC", "CPP_SOURCE", "CPU_SRC", "KERNEL_SRC", "SRC")
# GCC's remarks on what its vectoriser did and did not do, added to the build's own flags.
_REMARK_FLAGS = ["-c", "-o", "/dev/null", "-fopt-info-vec-optimized", "-fopt-info-vec-missed"]
_REMARK = re.compile(r"^[^:\s]+\.cpp:(\d+):(\d+): (optimized|missed): (.*)$")
_MAX_LOOPS = 12
# A loop written with SIMD intrinsics is vector code already, which GCC's auto-vectoriser reports as a
# loop it could not vectorise: such loops are named as explicit SIMD instead (x86 and Arm types).
_INTRINSICS = re.compile(r"\b(_mm\d*_\w+|__m(128|256|512)[id]?h?|v\w+q_[a-z]\d+|sv\w+_[a-z]\d+)\b")
# The call that starts an OpenMP region: GCC reports the loop around it, which is no loop of the kernel's.
_OPENMP_CALL = "__builtin_GOMP_parallel"
_TIMEOUT_S = 60


@dataclass
class Loop:
    line: int  # in the Python file where the source maps back, else in the C++ source
    vectorized: bool
    detail: str  # the vector width, or why not
    intrinsics: bool = False  # written with SIMD intrinsics: vector code whatever GCC says


@dataclass
class VectorReport:
    status: str  # ok | no_source | unavailable | compile_error
    loops: list[Loop] = field(default_factory=list)
    note: str = ""

    def summary(self) -> str:
        """A few lines for the Coder and the Critic."""
        if self.status != "ok":
            return f"vectorisation report (g++): {self.status}{': ' + self.note if self.note else ''}"
        explicit = [loop for loop in self.loops if loop.intrinsics]
        scalar = [loop for loop in self.loops if not loop.intrinsics]
        done = sum(1 for loop in scalar if loop.vectorized)
        head = f"vectorisation report (g++ -O3 -march=native): {done} of {len(scalar)} loops vectorised by the compiler"
        lines = [head + (f", {len(explicit)} written with SIMD intrinsics" if explicit else "")]
        lines += [f"line {loop.line}: {_state(loop)}" for loop in self.loops[:_MAX_LOOPS]]
        return "\n".join(lines)


def _state(loop: Loop) -> str:
    if loop.intrinsics:
        return "SIMD intrinsics (vector code as written)"
    return f"vectorised, {loop.detail}" if loop.vectorized else f"not vectorised: {loop.detail}"


def parse_remarks(text: str) -> list[Loop]:
    """Loops from GCC's vectorisation remarks: one per source line, vectorised if any remark there
    says so (GCC tries a loop several times: versions, epilogues, OpenMP's outlined copy), else the
    first reason it gave for that loop."""
    vectorized: dict[int, str] = {}
    missed: dict[int, str] = {}
    pending: int | None = None  # the loop GCC just said it could not vectorise: its reason follows
    for raw in text.splitlines():
        match = _REMARK.match(raw.strip())
        if not match:
            continue
        line, kind, message = int(match[1]), match[3], match[4]
        if kind == "optimized" and "loop vectorized" in message:
            width = re.search(r"using (\d+) byte vectors", message)
            vectorized.setdefault(line, f"{width[1]}-byte vectors" if width else "vectorised")
        elif kind == "missed" and "couldn't vectorize loop" in message:
            pending = line
            missed.setdefault(line, "")
        elif kind == "missed" and pending is not None and not missed[pending]:
            missed[pending] = message.removeprefix("not vectorized: ")
    loops = [Loop(line, True, width) for line, width in vectorized.items()]
    loops += [Loop(line, False, why or "no reason given") for line, why in missed.items()
              if line not in vectorized and _OPENMP_CALL not in why]
    return sorted(loops, key=lambda loop: loop.line)


def _mark_intrinsics(loops: list[Loop], source: str) -> None:
    """Loops whose reported line or the two around it use SIMD intrinsics (GCC names a loop by its
    header or its body's first statement)."""
    lines = source.splitlines()
    for loop in loops:
        near = " ".join(lines[max(0, loop.line - 2):loop.line + 1])
        loop.intrinsics = bool(_INTRINSICS.search(near))


_LOOP_HEADER = re.compile(r"\b(for|while|do)\b")


def _header_line(source: str, line: int) -> int:
    """The loop's header line where GCC named its body's first statement (an OpenMP loop is reported
    at the first line inside it): a reader looks for the `for`, not for the statement under it."""
    lines = source.splitlines()
    if 1 < line <= len(lines) and not _LOOP_HEADER.search(lines[line - 1]) and _LOOP_HEADER.search(lines[line - 2]):
        return line - 1
    return line


def analyze_cpu_submission(path: str | Path) -> VectorReport:
    """The vectorisation report of a Python submission's native source (`CPU_CONSTANTS`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        return VectorReport("no_source", note=f"cannot read {path.name}: {exc}")
    found = extract_kernel_source(text, CPU_CONSTANTS, file=path.name, marker='extern "C"')
    if found is None:
        return VectorReport("no_source", note='no module-level string with an extern "C" function')
    command = _command()
    if shutil.which(command[0]) is None:
        return VectorReport("unavailable", note=f"{command[0]} is not installed")
    remarks = _compile(found.text, tuple(command))
    if remarks is None:
        return VectorReport("compile_error", note="the source did not compile with the build's flags")
    loops = parse_remarks(remarks)
    _mark_intrinsics(loops, found.text)
    for loop in loops:
        loop.line = _header_line(found.text, loop.line)
        where = found.location(loop.line)
        loop.line = where[1] if where else loop.line
    return VectorReport("ok", loops)


def _command() -> list[str]:
    """The build's own compiler and flags (sandbox/native.py), compiling to an object, with remarks."""
    from sandbox.native import _toolchain

    chain = _toolchain("cpp", [], openmp=True)
    return [chain.compiler, *(f for f in chain.flags if f != "-shared"), *_REMARK_FLAGS]


@functools.lru_cache(maxsize=64)
def _compile(source: str, command: tuple[str, ...]) -> str | None:
    """GCC's remarks on the source, compiled in the candidate's sandbox; None if it did not compile.
    Kept per source: the Critic's review and its explanation ask about the same kernel."""
    from sandbox.judge.isolation import compiler_command

    with tempfile.TemporaryDirectory(prefix="ks-vec-") as work:
        (Path(work) / "kernel.cpp").write_text(source)
        wrapped = compiler_command([*command, "kernel.cpp"], Path(work))
        try:
            proc = subprocess.run(wrapped, cwd=work, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return proc.stderr if proc.returncode == 0 else None
