"""ROCTx ranges around the timed calls, for rocprofv3's marker trace.

When the orchestrator starts a worker under rocprofv3 it sets `KS_PROFILED=1`; the worker then
loads the ROCTx library (rocprofiler-sdk's `librocprofiler-sdk-roctx`, or the older
`libroctx64`) with ctypes and names each timed call, so the trace says which kernels belong to
which call. Anywhere else (no profiler, no ROCm) every call here does nothing. Standard library
only: this runs inside the sandbox worker.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PROFILED_ENV = "KS_PROFILED"
LIBRARIES = ("rocprofiler-sdk-roctx", "roctx64")  # newest first
ROCM_LIB_DIRS = (Path(os.environ.get("ROCM_PATH", "/opt/rocm")) / "lib", Path("/opt/rocm/lib"))


def load_library(names: tuple[str, ...] = LIBRARIES) -> ctypes.CDLL | None:
    """The first ROCTx library found by the loader or under ROCm's lib folder, or None."""
    for name in names:
        candidates = [ctypes.util.find_library(name)]
        candidates += [str(d / f"lib{name}.so") for d in ROCM_LIB_DIRS]
        for candidate in filter(None, candidates):
            try:
                lib = ctypes.CDLL(candidate)
                push, pop = lib.roctxRangePushA, lib.roctxRangePop
            except (OSError, AttributeError):
                continue
            push.argtypes, push.restype = [ctypes.c_char_p], ctypes.c_int
            pop.argtypes, pop.restype = [], ctypes.c_int
            return lib
    return None


class Ranges:
    """Push and pop named ranges; inert without a library."""

    def __init__(self, lib: ctypes.CDLL | None) -> None:
        self._lib = lib

    @property
    def active(self) -> bool:
        return self._lib is not None

    def push(self, name: str) -> None:
        if self._lib is not None:
            self._lib.roctxRangePushA(name.encode())

    def pop(self) -> None:
        if self._lib is not None:
            self._lib.roctxRangePop()


_RANGES: Ranges | None = None


def ranges() -> Ranges:
    """This process's ranges: live only in a worker started under the profiler."""
    global _RANGES
    if _RANGES is None:
        lib = load_library() if os.environ.get(PROFILED_ENV) == "1" else None
        if os.environ.get(PROFILED_ENV) == "1" and lib is None:
            log.warning("started under the profiler but no ROCTx library loads: calls are not named")
        _RANGES = Ranges(lib)
    return _RANGES


def call_marker(shape: str) -> str:
    """The range around each timed call of the candidate on one shape."""
    return f"ks_call:{shape}"


def reference_marker(shape: str) -> str:
    """The range around each timed call of the reference on one shape."""
    return f"ks_ref:{shape}"
