"""Compile C++ or CUDA source into a shared library and call it with tensors.

This is the fast path for candidates: a plain `g++`/`nvcc` build of the
kernel alone, without PyTorch's headers, loaded with ctypes. A small CUDA
kernel builds in about a second or two instead of the half-minute that
`torch.utils.cpp_extension.load_inline` spends on the PyTorch headers, and
the build cache makes a rebuild of the same source a file lookup.

Exported functions are `extern "C"`. Arguments are converted by value type:
a tensor passes its data pointer, an int an `int64_t`, a float a `double`,
a bool an `int64_t`, None a null pointer. CUDA launches with no stream argument
go to the legacy default stream, which orders them with PyTorch's default
stream; after each call of a CUDA library the launch error, if any, is raised.

    from sandbox.native import load_cuda
    lib = load_cuda(SOURCE)
    lib.add(a, b, out, a.numel())
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox import buildcache
from sandbox.safe_env import safe_env

BUILD_TIMEOUT_S = float(os.environ.get("KS_BUILD_TIMEOUT", "600"))
# The largest library a build may leave in the cache, which every later runner can read: kernels with
# tables run to a few MB; a red-team kernel compiled a 64 MB array into one, a channel to later
# candidates and a way to fill the disk.
MAX_LIBRARY_MB = 32
# A compiler's output kept in a build record and the cache: its first and last this many bytes. A
# red-team source made the compiler print 136 MB, which the cache kept and every verdict carried
# (one 270 MB line the orchestrator choked on, past the time limit).
LOG_KEEP_BYTES = 32 << 10
# A failure the compiler did not decide (it timed out, was killed, or the disk or memory ran out) may not
# recur: it is not cached, so the same source is built again next time rather than refused for good. A
# candidate that filled its memory group before asking for the builds of other sources had the compiler
# killed there, and each failure was cached for every later evaluation of that source (red-team round 27).
_TRANSIENT = ("No space left on device", "Cannot allocate memory", "Killed signal terminated program",
              "internal compiler error: Killed", "virtual memory exhausted", "out of memory")
# A library's name is its source file's name in the build folder and in diagnostics: an identifier, nothing a
# path could be made of (red-team round 27 had the judge write its text, as the judge's user, wherever an
# absolute or `../` name pointed).
_LIBRARY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

# Every build this process asked for, in order; the worker copies it into the
# verdict (commands, logs, cache hits, seconds).
BUILD_RECORDS: list[dict[str, Any]] = []

_DIAGNOSTIC = re.compile(
    r"^(?P<file>[^\s:()]+?)(?:\((?P<pline>\d+)\)|:(?P<line>\d+)(?::(?P<col>\d+))?)"
    r":\s*(?P<severity>fatal error|error|warning)\s*[:#]?\s*(?P<message>.*)$"
)

_CUDA_HELPERS = """
#include <cuda_runtime.h>
extern "C" int ks_last_error(void) { return (int)cudaGetLastError(); }
extern "C" const char* ks_error_string(int code) {
  return cudaGetErrorString((cudaError_t)code);
}
"""


@dataclass
class Diagnostic:
    file: str
    line: int
    column: int | None
    severity: str
    message: str


def parse_diagnostics(log: str) -> list[Diagnostic]:
    """Compiler messages as (file, line, severity, message), gcc and nvcc style."""
    found: list[Diagnostic] = []
    for raw in log.splitlines():
        match = _DIAGNOSTIC.match(raw.strip())
        if not match:
            continue
        line = match.group("pline") or match.group("line")
        col = match.group("col")
        found.append(
            Diagnostic(
                file=match.group("file"),
                line=int(line),
                column=int(col) if col else None,
                severity="error" if "error" in match.group("severity") else "warning",
                message=match.group("message").strip(),
            )
        )
    return found


class BuildError(RuntimeError):
    """The compiler rejected the source; carries its full log."""

    def __init__(self, name: str, log: str) -> None:
        self.log = log
        self.diagnostics = parse_diagnostics(log)
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        summary = f"{first.file}:{first.line}: {first.message}" if first else log[-500:]
        super().__init__(f"build of {name!r} failed: {summary}")


# Flags a candidate may add to a build: optimisation, code generation, warnings, macros, include
# folders and libraries by name. Nothing that names a program, a plugin, a file to write, or options
# handed on to another tool: builds run on the judge's side, where `-wrapper`, `-B`, `-fplugin=`,
# `-Wl,...`, `@file`, `-ccbin` or `-Xcompiler` would run the candidate's choice of program.
_VALUE = r"[A-Za-z0-9_.+\-]+"
_COMMON_FLAGS = (
    r"-O[0-3sgz]?|-Ofast|-g[0-3]?|-w|-std=[a-z0-9+]+|-D[A-Za-z_][A-Za-z0-9_]*(=\S*)?|-U[A-Za-z_][A-Za-z0-9_]*"
    r"|-I[^\s@]+|-l[A-Za-z0-9_+.\-]+"
)
_FLAG_RULES = {
    "cpp": re.compile(
        _COMMON_FLAGS
        + r"|-march=" + _VALUE + r"|-mtune=" + _VALUE + r"|-m(no-)?[a-z0-9\-]+(=" + _VALUE + r")?"
        + r"|-f(no-)?(?!plugin|profile|auto-profile|dump|create-profile|specs)[a-z0-9\-]+(=[A-Za-z0-9_.,+\-]+)?"
        + r"|-W(?![lap],)(no-)?[a-z0-9\-]+(=[a-z0-9\-]+)?|-pthread|-fPIC|-shared|--param=[a-z0-9\-]+=[0-9]+"
    ),
    "cuda": re.compile(
        _COMMON_FLAGS
        + r"|-G|-lineinfo|--?use_fast_math|--(ftz|prec-div|prec-sqrt|fmad)=(true|false)|--?maxrregcount=[0-9]+"
        + r"|-Xptxas=[A-Za-z0-9_=,.\-]+|--ptxas-options=[A-Za-z0-9_=,.\-]+|--expt-relaxed-constexpr"
        + r"|--expt-extended-lambda|--extended-lambda|--restrict|--?res(ource)?-usage|--default-stream=[a-z\-]+"
        + r"|-gencode=arch=compute_[0-9]+[af]?,code=(sm|compute)_[0-9]+[af]?|-arch=(sm|compute)_[0-9]+[af]?"
    ),
}


def checked_flags(lang: str, flags: Sequence[str]) -> list[str]:
    """The candidate's extra build flags, each on the allow-list, or ValueError naming the first
    that is not (one flag per item: `-Xptxas=-v`, not `-Xptxas`, `-v`)."""
    rule = _FLAG_RULES.get(lang)
    if rule is None:
        raise ValueError(f"unknown language {lang!r}: expected 'cpp' or 'cuda'")
    for flag in flags:
        if not isinstance(flag, str) or rule.fullmatch(flag) is None:
            raise ValueError(
                f"build flag {str(flag)[:80]!r} is not allowed: a build may add optimisation, code-generation, "
                "warning and -D/-U/-I/-l flags, one per item, but nothing that runs another program or writes files"
            )
    return list(flags)


@dataclass
class _Toolchain:
    lang: str
    compiler: str
    suffix: str
    flags: list[str] = field(default_factory=list)


def cuda_arch() -> str:
    """The SM architecture to build for, e.g. '90a' on Hopper.

    $KS_CUDA_ARCH wins (the orchestrator sets it for builders that see no GPU);
    otherwise the current device is asked. The 'a' suffix on sm_90 and newer
    enables the architecture-specific instructions (wgmma, tcgen05).
    """
    forced = os.environ.get("KS_CUDA_ARCH")
    if forced:
        return forced
    import torch

    if not torch.cuda.is_available():
        raise BuildError("cuda", "no CUDA device visible and KS_CUDA_ARCH is not set")
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}{'a' if major >= 9 else ''}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _toolchain(lang: str, extra: Sequence[str], openmp: bool) -> _Toolchain:
    extra = checked_flags(lang, extra)
    if lang == "cpp":
        compiler = os.environ.get("CXX", "g++")
        flags = ["-O3", "-march=native", "-std=c++17", "-fPIC", "-shared"]
        if openmp:
            flags.append("-fopenmp")
        return _Toolchain("cpp", compiler, ".cpp", flags + list(extra))
    if lang == "cuda":
        compiler = os.environ.get("NVCC", "nvcc")
        arch = cuda_arch()
        flags = [
            "-O3",
            "-std=c++17",
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "-lineinfo",
            f"-gencode=arch=compute_{arch},code=sm_{arch}",
        ]
        return _Toolchain("cuda", compiler, ".cu", flags + list(extra))
    raise ValueError(f"unknown language {lang!r}: expected 'cpp' or 'cuda'")


# How a compiler command runs: given the command and its work folder, the command to run instead
# (the judge passes a sandbox of the candidate's own view, with only that folder writable).
CompileWrapper = Callable[[list[str], Path], list[str]]


def _compile(command: list[str], work: str) -> tuple[str, int | None]:
    """Run a compiler: its output (stdout and stderr as they came, of which the first and last
    `LOG_KEEP_BYTES` are kept, whatever it prints) and its exit code, None past the build timeout."""
    head, tail, dropped = bytearray(), bytearray(), 0
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=work, env=safe_env())
    assert proc.stdout is not None
    try:
        while True:
            ready = select.select([proc.stdout], [], [], max(0.0, min(1.0, deadline - time.monotonic())))[0]
            chunk = os.read(proc.stdout.fileno(), 1 << 16) if ready else b""  # what the pipe holds, no waiting
            if chunk:
                room = LOG_KEEP_BYTES - len(head)
                head += chunk[:room]
                tail += chunk[room:] if room > 0 else chunk
                if len(tail) > LOG_KEEP_BYTES:
                    dropped += len(tail) - LOG_KEEP_BYTES
                    del tail[:len(tail) - LOG_KEEP_BYTES]
            elif ready:  # end of output: the compiler is exiting
                break
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return "", None
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "", None
    finally:
        proc.stdout.close()
    middle = f"\n[... {dropped} bytes of the compiler's output left out ...]\n".encode() if dropped else b""
    return (bytes(head) + middle + bytes(tail)).decode(errors="replace"), code


def _build(name: str, source: str, chain: _Toolchain, wrap: CompileWrapper | None = None,
           limited: Callable[[], bool] | None = None) -> Path:
    """The library built from `source`, from the cache or compiled; `limited` says, after a failed compile,
    whether a limit outside the compiler (the caller's memory group) stopped it: then nothing is cached."""
    if not _LIBRARY_NAME.fullmatch(name):
        log = f"a library's name is an identifier of at most 64 letters, digits and underscores, not {name[:80]!r}"
        BUILD_RECORDS.append({"name": name[:80], "lang": chain.lang, "key": "", "cached": False, "ok": False,
                              "seconds": 0.0, "command": [], "log": log})
        raise BuildError(name[:80], log)
    if shutil.which(chain.compiler) is None:
        raise BuildError(name, f"compiler {chain.compiler!r} not found on PATH")
    host = _cpu_model() if chain.lang == "cpp" else ""
    key = buildcache.cache_key(
        chain.lang, source, " ".join(chain.flags), buildcache.toolchain_id(chain.compiler), host
    )
    entry = buildcache.entry(key)
    record: dict[str, Any] = {"name": name, "lang": chain.lang, "key": key}
    started = time.perf_counter()
    with entry.locked():
        status = entry.status()
        if status is not None and (not status["ok"] or entry.intact()):
            record.update(cached=True, ok=status["ok"], command=status["command"])
            record.update(seconds=time.perf_counter() - started, log=entry.log_file.read_text())
            BUILD_RECORDS.append(record)
            if not status["ok"]:
                raise BuildError(name, record["log"])
            return entry.library
        with tempfile.TemporaryDirectory(dir=entry.path) as work:
            src = Path(work) / f"{name}{chain.suffix}"
            src.write_text(source)
            out = Path(work) / "lib.so"
            command = [chain.compiler, *chain.flags, str(src), "-o", str(out)]
            transient = False
            log, code = _compile(wrap(command, Path(work)) if wrap else command, work)
            if code is None:
                log, ok, transient = f"compiler timed out after {BUILD_TIMEOUT_S:.0f} s", False, True
            else:
                ok = code == 0
                stopped = code < 0 or any(t in log for t in _TRANSIENT) or (limited is not None and limited())
                transient = not ok and stopped
            # Paths of the throw-away folder mean nothing to a reader.
            log = log.replace(str(src), src.name)
            seconds = time.perf_counter() - started
            if ok and out.stat().st_size > MAX_LIBRARY_MB << 20:
                ok = False
                log += (f"the built library is {out.stat().st_size / 2**20:.0f} MB, over the {MAX_LIBRARY_MB} MB a "
                        "kernel's library may take: keep large tables out of the source (compute them, or pass them in)")
            if ok:
                os.replace(out, entry.library)
            if not transient:
                entry.record(ok, log, seconds, command)
    record.update(cached=False, ok=ok, command=command, seconds=seconds, log=log)
    BUILD_RECORDS.append(record)
    if not ok:
        raise BuildError(name, log)
    return entry.library


def _convert(value: Any) -> Any:
    if hasattr(value, "data_ptr"):
        return ctypes.c_void_p(value.data_ptr())
    if value is None:
        return ctypes.c_void_p(None)
    if isinstance(value, bool):
        return ctypes.c_int64(int(value))
    if isinstance(value, int):
        return ctypes.c_int64(value)
    if isinstance(value, float):
        return ctypes.c_double(value)
    if isinstance(value, (ctypes._SimpleCData, ctypes.c_void_p)):
        return value
    raise TypeError(f"cannot pass {type(value).__name__} to a native function")


class NativeLibrary:
    """A loaded library whose exported functions take tensors and numbers."""

    def __init__(self, name: str, path: Path, lang: str) -> None:
        self.name = name
        self.path = path
        self.lang = lang
        self._lib = ctypes.CDLL(str(path))
        self._functions: dict[str, Any] = {}
        if lang == "cuda":
            self._lib.ks_error_string.restype = ctypes.c_char_p

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        try:
            return self._functions[attr]
        except KeyError:
            pass
        try:
            func = getattr(self._lib, attr)
        except AttributeError:
            raise AttributeError(
                f"{self.name}: no exported function {attr!r} (is it extern \"C\"?)"
            ) from None
        func.restype = None
        wrapper = self._wrap(attr, func)
        self._functions[attr] = wrapper
        return wrapper

    def _wrap(self, attr: str, func: Any) -> Any:
        lib = self._lib
        check = self.lang == "cuda"

        def call(*args: Any) -> None:
            func(*[_convert(a) for a in args])
            if check:
                code = lib.ks_last_error()
                if code:
                    message = lib.ks_error_string(code).decode()
                    raise RuntimeError(f"{self.name}.{attr}: CUDA error {code}: {message}")

        call.__name__ = attr
        return call


def load_cpp(
    source: str, *, name: str = "kernel", flags: Sequence[str] = (), openmp: bool = True
) -> NativeLibrary:
    """Build C++ source with g++ (-O3 -march=native, OpenMP) and load it."""
    return NativeLibrary(name, library(name=name, source=source, lang="cpp", flags=list(flags), openmp=openmp), "cpp")


def load_cuda(source: str, *, name: str = "kernel", flags: Sequence[str] = ()) -> NativeLibrary:
    """Build CUDA C++ source with nvcc for the current GPU and load it."""
    return NativeLibrary(name, library(name=name, source=source, lang="cuda", flags=list(flags), openmp=False), "cuda")


# Set in the runner: builds are the judge's (a trusted builder with the only write access to the
# cache); the runner receives the path of a library the judge has built and hashed.
BUILD_SERVICE: Callable[..., Path] | None = None


def library(*, name: str, source: str, lang: str, flags: list[str], openmp: bool,
            wrap: CompileWrapper | None = None, limited: Callable[[], bool] | None = None) -> Path:
    """The built library for this source: through the build service where one is set; `wrap` runs
    the compiler inside whatever the caller trusts (the judge: a sandbox of its own), `limited` says
    whether a limit of the caller's stopped a failed compile (`_build`)."""
    if BUILD_SERVICE is not None:
        return BUILD_SERVICE(name=name, source=source, lang=lang, flags=list(flags), openmp=openmp)
    if lang == "cuda":
        return _build(name, source + _CUDA_HELPERS, _toolchain("cuda", flags, openmp=False), wrap, limited)
    if lang == "cpp":
        return _build(name, source, _toolchain("cpp", flags, openmp), wrap, limited)
    raise BuildError(name, f"unknown language {lang!r}: expected 'cpp' or 'cuda'")
