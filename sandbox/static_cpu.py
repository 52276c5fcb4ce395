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

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.static_analysis import extract_kernel_source

CPU_CONSTANTS = ("SOURCE", "CPP_SRC", "CPP_SOURCE", "CPU_SRC", "KERNEL_SRC", "SRC")
# What the build compiles with (sandbox/native.py), less linking: the report is about that code.
_FLAGS = ["-O3", "-march=native", "-std=c++17", "-fPIC", "-fopenmp", "-c", "-o", "/dev/null",
          "-fopt-info-vec-optimized", "-fopt-info-vec-missed"]
_REMARK = re.compile(r"^[^:\s]+\.cpp:(\d+):(\d+): (optimized|missed): (.*)$")
_MAX_LOOPS = 12
_TIMEOUT_S = 60


@dataclass
class Loop:
    line: int  # in the Python file where the source maps back, else in the C++ source
    vectorized: bool
    detail: str  # the vector width, or why not


@dataclass
class VectorReport:
    status: str  # ok | no_source | unavailable | compile_error
    loops: list[Loop] = field(default_factory=list)
    note: str = ""

    def summary(self) -> str:
        """A few lines for the Coder and the Critic."""
        if self.status != "ok":
            return f"vectorisation report (g++): {self.status}{': ' + self.note if self.note else ''}"
        done = sum(1 for loop in self.loops if loop.vectorized)
        lines = [f"vectorisation report (g++ -O3 -march=native): {done} of {len(self.loops)} loops vectorised"]
        lines += [f"line {loop.line}: {'vectorised, ' if loop.vectorized else 'not vectorised: '}{loop.detail}"
                  for loop in self.loops[:_MAX_LOOPS]]
        return "\n".join(lines)


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
    loops += [Loop(line, False, why or "no reason given") for line, why in missed.items() if line not in vectorized]
    return sorted(loops, key=lambda loop: loop.line)


def analyze_cpu_submission(path: str | Path, compiler: str = "g++") -> VectorReport:
    """The vectorisation report of a Python submission's native source (`CPU_CONSTANTS`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        return VectorReport("no_source", note=f"cannot read {path.name}: {exc}")
    found = extract_kernel_source(text, CPU_CONSTANTS, file=path.name, marker='extern "C"')
    if found is None:
        return VectorReport("no_source", note='no module-level string with an extern "C" function')
    if shutil.which(compiler) is None:
        return VectorReport("unavailable", note=f"{compiler} is not installed")
    remarks = _compile(found.text, compiler)
    if remarks is None:
        return VectorReport("compile_error", note="the source did not compile with the build's flags")
    loops = parse_remarks(remarks)
    for loop in loops:
        where = found.location(loop.line)
        loop.line = where[1] if where else loop.line
    return VectorReport("ok", loops)


def _compile(source: str, compiler: str) -> str | None:
    """GCC's remarks on the source, compiled in the candidate's sandbox; None if it did not compile."""
    from sandbox.judge.isolation import compiler_command

    with tempfile.TemporaryDirectory(prefix="ks-vec-") as work:
        (Path(work) / "kernel.cpp").write_text(source)
        command = compiler_command([compiler, *_FLAGS, "kernel.cpp"], Path(work))
        try:
            proc = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
    return proc.stderr if proc.returncode == 0 else None
