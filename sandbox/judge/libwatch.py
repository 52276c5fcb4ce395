"""Which library code the runner actually ran: sampled from outside the runner with perf.

A candidate can switch off anything inside its own process, so library use is seen from
the judge: `perf record` samples every thread of the runner, and every thread and process it
starts later, in user space (a library runs there; leaving the kernel out halves the cost of
reading the samples back) while it checks and times, and each sample names the shared object and the symbol it hit.
A sample counts against the candidate when its symbol matches one of the problem's forbidden
patterns and it lies in a library (anything but the candidate's own code: its builds, JIT output
under its private /tmp) or has a name only a library's own code has (torch's at::native, BLAS
entry points: a library copied under /tmp still counts). Code run from a memfd, a deleted file or
anonymous memory cannot be looked at, so much time there is a rejection of its own. Names the Python layer uses do not
matter: `addbmm`, `torch.matmul`, numpy's `dot` and a ctypes call into BLAS all end in
the same gemm symbols.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_HZ = 997


@dataclass
class Sampled:
    """What the samples showed: total, and the forbidden (library, symbol) pairs with counts."""

    samples: int = 0
    forbidden: Counter[tuple[str, str]] = field(default_factory=Counter)
    hidden: int = 0  # samples in code with no file behind it (memfd, deleted, anonymous)
    error: str | None = None

    def hides_code(self) -> bool:
        """More than a twentieth of the runner's time in code no one can look at."""
        return self.hidden > max(10, 0.05 * self.samples)

    def describe(self) -> str:
        hits = ", ".join(f"{sym} in {Path(dso).name} ({n})" for (dso, sym), n in self.forbidden.most_common(3))
        return f"{sum(self.forbidden.values())} of {self.samples} samples of the runner were in {hits}"


def available() -> bool:
    return shutil.which("perf") is not None and os.environ.get("KS_LIBWATCH") != "off"


def patterns_for(forbidden_ops: list[str], extra: list[str]) -> list[re.Pattern[str]]:
    """Symbol patterns: the problem's own (`forbidden_symbols`), and each forbidden operator as a
    whole word in a symbol of torch's native implementations (`at::native`, mangled `6native`)."""
    # The name may be followed by a capital (mangled template arguments: `vectorized_outer_sumI...`).
    words = [re.compile(rf"6native.*(?<![A-Za-z]){re.escape(op.strip('_'))}(?![a-z])")
             for op in forbidden_ops if op.strip("_")]
    return words + [re.compile(p) for p in extra]


# Names only a library's own code has: torch's native implementations, BLAS entry points and kernels.
_LIBRARY_SHAPED = re.compile(
    r"6native|^(cblas_|openblas|mkl_|dnnl|gotoblas|blas_)|^[sdchz]gemm_($|kernel|beta|[io][nt]copy)|gemm_kernel|_[sdhz]gemm"
)


def _library_shaped(symbol: str) -> bool:
    return bool(_LIBRARY_SHAPED.search(symbol))


def _hidden(dso: str) -> bool:
    """Code run from where no file can be read back: a memfd, a deleted file, anonymous memory."""
    return dso.startswith(("/memfd:", "[anon", "//anon")) or dso.endswith("(deleted)") or dso == "[unknown]"


class LibraryWatch:
    """perf sampling of one process tree, from start() to stop()."""

    def __init__(self, work: Path, own_code: list[str]) -> None:
        self.data = work / "perf.data"
        self.own_code = own_code  # path prefixes of the candidate's own code
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None

    def start(self, pid: int) -> None:
        if not available():
            self.error = "perf is not installed"
            return
        try:
            self.proc = subprocess.Popen(
                ["perf", "record", "-q", "-B", "--no-buildid-cache", "-e", "cpu-clock:u", "-F", str(SAMPLE_HZ),
                 "-p", str(pid), "-o", str(self.data)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            self.error = f"perf could not start: {exc}"

    def stop(self, patterns: list[re.Pattern[str]]) -> Sampled:
        if self.proc is None:
            return Sampled(error=self.error or "not started")
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return Sampled(error="perf did not stop")
        if not self.data.exists():
            return Sampled(error=f"perf wrote no samples: {err.decode(errors='replace')[-300:]}")
        try:
            out = subprocess.run(
                ["perf", "script", "-i", str(self.data), "-F", "ip,sym,dso", "--no-demangle", "-k", "/dev/null"],
                capture_output=True, text=True, timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Sampled(error=f"perf script failed: {exc}")
        return self._tally(out.stdout, patterns)

    def _tally(self, text: str, patterns: list[re.Pattern[str]]) -> Sampled:
        result = Sampled()
        for line in text.splitlines():
            parts = line.strip().split(None, 1)  # "ip symbol (dso)"
            if len(parts) != 2:
                continue
            result.samples += 1
            # Symbols are printed mangled (no spaces); the file may have spaces: "/memfd:x (deleted)".
            sym, _, dso = parts[1].partition(" (")
            dso, sym = dso.removesuffix(")"), sym.split("+")[0]
            if _hidden(dso):
                result.hidden += 1
                continue
            if not sym or sym == "[unknown]":
                continue
            # A library's own code (torch's at::native, BLAS entry points and kernels) counts wherever
            # its file lies, a copy under /tmp included; other matches count outside the candidate's code.
            if any(p.search(sym) for p in patterns) and (_library_shaped(sym) or not self._own(dso)):
                result.forbidden[(dso, sym)] += 1
        return result

    def _own(self, dso: str) -> bool:
        return dso.startswith(("/tmp/", "[")) or any(dso.startswith(p) for p in self.own_code)
