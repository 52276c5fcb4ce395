"""Which library code the runner actually ran: sampled from outside the runner with perf.

A candidate can switch off anything inside its own process, so library use is seen from
the judge: `perf record` samples every thread of the runner, and every thread and process it
starts later, in user space (a library runs there; leaving the kernel out halves the cost of
reading the samples back) while it checks and times, and each sample names the shared object and the symbol it hit.
A sample counts against the candidate when its symbol matches one of the problem's forbidden
patterns and it lies in a library (anything but the candidate's own code: its builds, JIT output
under its private /tmp) or has a name only a library's own code has (torch's at::native, BLAS
entry points: a library copied under /tmp still counts). Code run from a memfd, a deleted file or
anonymous memory cannot be looked at, so much time there is a rejection of its own. In code the candidate
controls, names prove nothing (it writes them): there a sample also counts when the bytes around it are a
forbidden library function's (`libcode`). Names the Python layer uses do not
matter: `addbmm`, `torch.matmul`, numpy's `dot` and a ctypes call into BLAS all end in
the same gemm symbols.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox import buildcache
from sandbox.judge import libcode, procs
from sandbox.judge.glimpse import WRITABLE, Glimpses, in_memory, mapped_file
from sandbox.judge.elfsyms import SymbolTable, table_for
from sandbox.judge.perfdata import Hit, PerfData, PerfDataError

SAMPLE_HZ = 997
ATTACH_TIMEOUT_S = 10.0
_WINDOW_STEP = 512  # samples within this many bytes of one another share a look at the code around them
# Bracketed mappings that are the kernel's own code pages, not the process's memory.
KERNEL_PAGES = ("[vdso]", "[vsyscall]", "[vectors]", "[uprobes]")


@dataclass
class Sampled:
    """What the samples showed: total, and the forbidden (library, symbol) pairs with counts."""

    samples: int = 0
    forbidden: Counter[tuple[str, str]] = field(default_factory=Counter)
    hidden: int = 0  # samples in code with no file behind it (memfd, deleted, anonymous)
    hidden_in: Counter[str] = field(default_factory=Counter)  # where those samples were mapped from
    lost: int = 0  # records the kernel dropped from perf's full buffers (perfdata's `lost`)
    error: str | None = None

    def hides_code(self) -> bool:
        """More than a twentieth of the runner's time in code no one can look at."""
        return self.hidden > max(10, 0.05 * self.samples)

    def describe_hidden(self) -> str:
        return ", ".join(f"{path} ({n})" for path, n in self.hidden_in.most_common(3))

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


def identifiers(source: str) -> frozenset[str]:
    """Every identifier a submission's text names (its Python and the C++ or CUDA in its strings)."""
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))


def name_parts(symbol: str) -> list[str]:
    """The names a function's symbol is made of: its scopes and its own name, from an Itanium-mangled
    symbol's length-prefixed names (`_ZN6native11softmax_rowEPKfPfl`: native, softmax_row) or a plain
    one, without the compiler's clone suffixes (`gemm_kernel._omp_fn.1`, `.constprop.0`, `.cold`).
    Empty where the symbol reads as neither."""
    base = symbol.split(".", 1)[0]
    if not base.startswith("_Z"):
        return [base] if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base) else []
    parts, i = [], 3 if base.startswith("_ZN") else 2
    while i < len(base) and base[i] in "KVr":  # a member function's qualifiers
        i += 1
    while (length := re.match(r"\d+", base[i:])) is not None:
        start = i + length.end()
        name = base[start:start + int(length.group())]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            return []
        parts.append(name)
        i = start + len(name)
    return parts


def _hidden(dso: str) -> bool:
    """Code run from where no file can be read back: a memfd, anonymous memory. (A file deleted before
    perf recorded its mapping is read through the mapping where it can be: `_Files`.)"""
    return dso.startswith(("/memfd:", "[anon", "//anon")) or dso == "[unknown]"


class _Gone:
    """The file a sample's code was mapped from is no longer there, or is another file now."""


_GONE = _Gone()


class _Files:
    """Each sampled file, read as the runner sees it (its own /tmp): through /proc/PID/root while
    the runner lives, checked against the inode that was mapped."""

    def __init__(self, runner: int | None) -> None:
        self.roots = [f"/proc/{runner}/root"] if runner is not None and os.access(f"/proc/{runner}/root/", os.R_OK) else []
        self.seen: dict[tuple[str, int | None], SymbolTable | None | _Gone] = {}
        self.in_memory: dict[tuple[str, int | None], bool] = {}  # by file: on an in-memory file system

    def writable(self, hit: Hit) -> bool:
        """Whether the candidate could have written the file: under its private folders, or on an
        in-memory file system, which is what every writable place of the sandbox is (its /tmp,
        /dev/shm, /var/tmp, /dev, the emptied top-level folders) and what nothing it reads from the
        host is."""
        if hit.path.startswith(WRITABLE):
            return True
        key = (hit.path, hit.inode)
        if key not in self.in_memory:
            self.in_memory[key] = self._on_memory_fs(hit)
        return self.in_memory[key]

    def _on_memory_fs(self, hit: Hit) -> bool:
        for root in [f"/proc/{hit.pid}/root", *self.roots]:
            try:
                return in_memory(root + hit.path)
            except OSError:
                continue
        return False

    def _places(self, hit: Hit) -> list[Path]:
        """Where the sample's file may be read: by its name as the runner sees it, then through the
        mapping itself (`glimpse.mapped_file`), which reaches the inode that was mapped even once its
        name is gone or names another file."""
        name = hit.path.removesuffix(" (deleted)")
        places = [Path(root + name) for root in [f"/proc/{hit.pid}/root", *self.roots]]
        mapped = mapped_file(hit.pid, hit.inode)
        return places + ([Path(mapped)] if mapped else [])

    def code(self, hit: Hit, start: int, end: int) -> bytes | None:
        """Bytes `start` to `end` of the sample's file, read as the runner saw it; None where it is gone."""
        for path in self._places(hit):
            try:
                if hit.inode is not None and path.stat().st_ino != hit.inode:
                    continue
                with path.open("rb") as f:
                    f.seek(start)
                    return f.read(end - start)
            except OSError:
                continue
        return None

    def table(self, hit: Hit) -> SymbolTable | None | _Gone:
        key = (hit.path, hit.inode)
        if key not in self.seen:
            self.seen[key] = self._read(hit)
        return self.seen[key]

    def _read(self, hit: Hit) -> SymbolTable | None | _Gone:
        replaced = False
        for path in self._places(hit):
            try:
                if hit.inode is not None and path.stat().st_ino != hit.inode:
                    replaced = True  # another file under that name now: the one mapped may still be reachable
                    continue
                table = table_for(path)
                # Code was mapped from it, yet it reads as no ELF file: overwritten after it was mapped
                # (a red-team kernel zeroed the magic of its copy of a BLAS library once loaded).
                return _GONE if table is None else table
            except OSError:
                continue
        # Gone or replaced, and not reachable through its mapping; without a view of the runner's files
        # (its root not readable here), nothing can be told.
        return _GONE if self.roots or replaced else None


def _acknowledged(fd: int, timeout: float) -> bool:
    """Whether perf wrote its "ack" line to `fd` within `timeout` seconds."""
    import select

    deadline = time.monotonic() + timeout
    seen = b""
    while b"ack\n" not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return False
        chunk = os.read(fd, 64)
        if not chunk:
            return False  # perf exited
        seen += chunk
    return True


def index_folder() -> Path:
    return buildcache.cache_root().parent / "libcode"


def prepare_index(integrity: dict[str, Any]) -> None:
    """Build or read the library-code index of a problem's forbidden patterns ahead of its evaluation
    (where perf samples: without samples the index is never asked)."""
    from sandbox.integrity import Policy

    if not available():
        return
    policy = Policy.from_dict(integrity)
    patterns = patterns_for(policy.forbidden_ops, policy.forbidden_symbols)
    if patterns:
        libcode.index_for(patterns, index_folder())


def preload_tables() -> None:
    """Read the symbol tables of the libraries this process has mapped (torch's among them, the same
    files the runner maps) while waiting for a request: the largest costs half a second."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/") and ".so" in fields[5]:
            try:
                table_for(Path(fields[5]))
            except OSError:
                continue


class LibraryWatch:
    """perf sampling of one process tree, from start() to stop()."""

    def __init__(self, work: Path, own_code: list[str], own_names: frozenset[str] = frozenset()) -> None:
        self.data = work / "perf.data"
        self.own_code = own_code  # path prefixes of the candidate's own code: what the judge built from it
        self.own_names = own_names  # the identifiers its source names (`identifiers`)
        self.proc: subprocess.Popen[bytes] | None = None
        self.error: str | None = None
        self.pid: int | None = None
        self._control: list[int] = []  # our ends of perf's control and acknowledgement pipes
        self.counted_from = 0  # samples before this (CLOCK_MONOTONIC, ns) are not counted (`resume`)

    def start(self, pid: int) -> None:
        """Attach to `pid` and return once perf says its events are on: perf follows the processes and
        threads started after that, so what the runner starts next (the candidate's import) is sampled.
        perf starts with its events off and is switched on through its control descriptor; its "ack"
        is the confirmation (attaching takes tens of milliseconds, time enough to start a helper)."""
        if not available():
            self.error = "perf is not installed"
            return
        control_read, control_write = os.pipe()
        ack_read, ack_write = os.pipe()
        try:
            self.pid = pid
            self.proc = subprocess.Popen(
                # --no-bpf-event: perf's side-band thread for BPF events (no use here: the samples are
                # user-space only) held every stop for about 0.9 s; without it perf stops in 3 ms.
                ["perf", "record", "-q", "-B", "--no-buildid-cache", "--no-bpf-event", "-k", "CLOCK_MONOTONIC",
                 "-e", "cpu-clock:u",
                 "-F", str(SAMPLE_HZ),
                 "--delay=-1", f"--control=fd:{control_read},{ack_write}", "-p", str(pid), "-o", str(self.data)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                pass_fds=(control_read, ack_write),
            )
            procs.own(self.proc.pid)
            # Run only where nothing else would: once a process it follows has exited, this perf polls in
            # a loop (red-team round 19: a core at 97 % for the rest of the evaluation, and the reference,
            # timed in the judge, 32 ms instead of 0.2; at nice 19 still so). Any other task preempts an
            # idle-policy one at once; its samples wait in its buffers until a core is free.
            os.sched_setscheduler(self.proc.pid, os.SCHED_IDLE, os.sched_param(0))
            # Our ends stay open while perf records: at the end of its control input perf stops sampling.
            self._control = [control_write, ack_read]
            # Sampling from before the candidate's import: a process the import starts is followed, and
            # the code it maps is recorded. Samples count from `resume`, once the candidate is loaded.
            os.write(control_write, b"enable\n")
            if not _acknowledged(ack_read, ATTACH_TIMEOUT_S):
                self.discard()
                self.error = f"perf did not confirm within {ATTACH_TIMEOUT_S:g} s that it was attached"
        except OSError as exc:
            self.discard()
            self.error = f"perf could not start: {exc}"
        finally:
            os.close(control_read)
            os.close(ack_write)
            if self.proc is None:
                self._close_control([control_write, ack_read])

    def resume(self) -> None:
        """Count samples from now on, once the candidate is loaded: what runs at its import (a build, an
        autotuner's fit on data of its own) is no call's, and samples taken there would only dilute the
        share of a call's time spent in code no one can read (red-team round 19: six seconds of honest
        work at import carried a memfd copy of OpenBLAS under the hidden-code threshold). perf samples
        on through the import all the same: the code mapped then is recorded only while it samples."""
        self.counted_from = time.monotonic_ns()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """perf stopped while the judge times something of its own (the reference): once a process it
        follows has exited, perf 6.1 polls in a loop at a full core, and even at the idle policy the
        reference beside it read 32 ms instead of 0.2 (red-team round 19, this 2-core VM). What the
        runner does meanwhile is still sampled: the kernel fills perf's buffers, read once it goes on."""
        if self.proc is None or self.proc.poll() is not None:
            yield
            return
        try:
            os.killpg(self.proc.pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            yield
            return
        try:
            yield
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass

    def _close_control(self, fds: list[int] | None = None) -> None:
        for fd in fds if fds is not None else self._control:
            try:
                os.close(fd)
            except OSError:
                pass
        self._control = []

    def discard(self) -> None:
        """Stop sampling without reading what was sampled."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self._close_control()
        self.data.unlink(missing_ok=True)

    def stop(self, patterns: list[re.Pattern[str]], glimpses: Glimpses | None = None) -> Sampled:
        if self.proc is None:
            return Sampled(error=self.error or "not started")
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return Sampled(error="perf did not stop")
        finally:
            self._close_control()
        if not self.data.exists():
            return Sampled(error=f"perf wrote no samples: {err.decode(errors='replace')[-300:]}")
        try:
            samples = PerfData(self.data)
        except (OSError, PerfDataError, struct.error) as exc:
            return Sampled(error=f"perf's samples could not be read: {exc}")
        return self._tally(samples, patterns, glimpses or Glimpses())

    def _tally(self, samples: PerfData, patterns: list[re.Pattern[str]], glimpses: Glimpses) -> Sampled:
        files = _Files(self.pid)
        counted = [hit for hit in samples.hits() if hit.time >= self.counted_from]
        # A sample that reads differently with the mappings of a process that may have shared its memory
        # (perfdata's `Hit.also`) is judged both ways: either reading can make it forbidden or hidden.
        # It counts once among the samples.
        hits = counted + [hit.also for hit in counted if hit.also is not None]
        symbols = [self._symbol(files, hit) for hit in hits]
        result = self.classify(((hit.path, symbol) for hit, symbol in zip(hits, symbols, strict=True)), patterns)
        result.samples = len(counted)
        result.lost = samples.lost
        if patterns:
            self._by_content(files, hits, symbols, patterns, result, glimpses)
        return result

    def _by_content(self, files: _Files, hits: list[Hit], symbols: list[str | None | _Gone],
                    patterns: list[re.Pattern[str]], result: Sampled, glimpses: Glimpses) -> None:
        """Count the samples in code the candidate controls (what the judge built from its source, files
        it could write) whose surrounding bytes are a forbidden library function's, whatever they are
        named (`libcode`): a library copied and renamed, or its machine code pasted into the build."""
        windows: dict[tuple[str, int | None, int], list[tuple[Hit, str | None]]] = {}
        for hit, symbol in zip(hits, symbols, strict=True):
            if isinstance(symbol, _Gone) or not (self._built(hit.path) or files.writable(hit)):
                continue
            if symbol and any(p.search(symbol) for p in patterns) and self._library_code(hit.path, symbol):
                continue  # counted by its name already
            windows.setdefault((hit.path, hit.inode, hit.file_offset // _WINDOW_STEP), []).append((hit, symbol))
        if not windows:
            return
        index = libcode.index_for(patterns, index_folder())
        for (path, inode, step), inside in windows.items():
            middle = step * _WINDOW_STEP + _WINDOW_STEP // 2
            # Not cut to the function the samples lie in: a candidate's own symbol table could cut its
            # pasted code into functions too short to recognise.
            start, end = max(middle - libcode.WINDOW, 0), middle + libcode.WINDOW
            code = files.code(inside[0][0], start, end)
            seen = glimpses.code(inode, start, end)
            if code is None:
                continue
            doubt = glimpses.doubt(inside[0][0].pid, path, inode)
            if seen is not None and code[seen[0] - start:seen[0] - start + len(seen[1])] != seen[1]:
                doubt = "it no longer holds what was seen running from it"
            if doubt is not None:
                result.hidden += len(inside)
                result.hidden_in[f"{path} ({doubt})"] += len(inside)
                count, owner = index.matches(seen[1]) if seen is not None else index.matches(code)
            else:
                count, owner = index.matches(code)
            if count >= libcode.MATCH:
                for _hit, symbol in inside:
                    result.forbidden[(path, f"{owner}'s code (named {symbol or 'nothing'} here)")] += 1

    @staticmethod
    def _symbol(files: _Files, hit: Hit) -> str | None | _Gone:
        """The function a sample landed in; _GONE where its code has no file to read it from."""
        if _hidden(hit.path):
            return _GONE
        if hit.path.startswith("["):
            # The kernel's own pages hold no library; any other bracketed name is anonymous memory the
            # kernel named for where it lies ([heap], [stack]): a red-team kernel ran a copy of BLAS
            # from memory it took with sbrk, and its samples all read `[heap]`.
            return None if hit.path in KERNEL_PAGES else _GONE
        table = files.table(hit)
        if isinstance(table, _Gone) or (table is not None and not len(table.starts)):
            return _GONE  # no file to read, or an ELF file that names none of its functions
        if table is None:
            return None
        symbol = table.symbol_at(hit.file_offset)
        if not symbol and files.writable(hit):
            # In a file the candidate could write, code no symbol names is code no one can name: its
            # tables may have been edited after the file was mapped (sizes cut to 1 byte, the names
            # zeroed in place).
            return _GONE
        return symbol

    def classify(self, resolved: Iterable[tuple[str, str | None | _Gone]], patterns: list[re.Pattern[str]]) -> Sampled:
        """Count (file, function) pairs: hidden code, and forbidden library code."""
        result = Sampled()
        for dso, sym in resolved:
            result.samples += 1
            if isinstance(sym, _Gone):
                result.hidden += 1
                result.hidden_in[dso] += 1
                continue
            if not sym:
                continue
            # A library's own code (torch's at::native, BLAS entry points and kernels) counts wherever
            # its file lies, a copy under /tmp included; other matches count outside the candidate's code.
            if any(p.search(sym) for p in patterns) and (self._library_code(dso, sym) or not self._own(dso)):
                result.forbidden[(dso, sym)] += 1
        return result

    def _library_code(self, dso: str, sym: str) -> bool:
        """A library's name, unless the judge built the function from the candidate's source, which names
        it: a kernel of its own called `bf16_gemm_kernel`, or put in a `namespace native`, is the
        candidate's code (red-team round 17 saw the matmul seed refused `forbidden-op` for its name alone)."""
        if not _library_shaped(sym):
            return False
        parts = name_parts(sym)
        return not (self._built(dso) and parts and all(part in self.own_names for part in parts))

    def _built(self, dso: str) -> bool:
        """Built by the judge from the candidate's source (its build cache)."""
        return any(dso.startswith(p) for p in self.own_code)

    def _own(self, dso: str) -> bool:
        return dso.startswith(("/tmp/", "[")) or self._built(dso)
