"""The judge's own reading of perf samples: ELF symbol tables by file offset, perf.data records,
and library code seen in a real process tree (the last two need perf; they start processes)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox.judge.elfsyms import table_for
from sandbox.judge.libwatch import LibraryWatch, Sampled
from sandbox.judge.perfdata import PerfData, PerfDataError

# A BLAS-shaped name: library code counts wherever its file lies, /tmp included.
LIBRARY = r"""
double cblas_ks_spin(long n) { double s = 0; for (long i = 0; i < n; ++i) s += (double)i * 0.5; return s; }
double ks_other_function(long n) { double s = 1; for (long i = 0; i < n; ++i) s *= 1.0000001; return s; }
"""


def _build(tmp_path: Path) -> Path:
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("no C compiler")
    src, lib = tmp_path / "spin.c", tmp_path / "libspin.so"
    src.write_text(LIBRARY)
    subprocess.run([shutil.which("gcc") or "cc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def _file_offset(address: int) -> tuple[str, int]:
    """Where an address of this process lies in the file mapped there."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(None, 5)
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if start <= address < end:
            return fields[5], address - start + int(fields[2], 16)
    raise AssertionError("address not mapped")


def test_a_function_is_named_by_its_offset_in_the_file(tmp_path: Path) -> None:
    lib = ctypes.CDLL(str(_build(tmp_path)))
    for name in ("cblas_ks_spin", "ks_other_function"):
        start = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        assert start is not None
        path, offset = _file_offset(start + 4)  # inside the function, not at its first byte
        table = table_for(Path(path))
        assert table is not None and table.symbol_at(offset) == name
    path, _ = _file_offset(ctypes.cast(lib.ks_other_function, ctypes.c_void_p).value or 0)
    table = table_for(Path(path))
    assert table is not None and table.symbol_at(0) is None  # the ELF header is no function's code


def _wiped(lib: Path, tmp_path: Path) -> Path:
    """A copy without section headers: the loader needs only the program headers."""
    import struct

    raw = bytearray(lib.read_bytes())
    struct.pack_into("<Q", raw, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", raw, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    copy = tmp_path / "libwiped.so"
    copy.write_bytes(raw)
    return copy


def test_a_library_without_section_headers_is_named_as_the_loader_names_it(tmp_path: Path) -> None:
    lib = ctypes.CDLL(str(_wiped(_build(tmp_path), tmp_path)))
    start = ctypes.cast(lib.cblas_ks_spin, ctypes.c_void_p).value
    assert start is not None
    path, offset = _file_offset(start + 4)
    table = table_for(Path(path))
    assert table is not None and table.symbol_at(offset) == "cblas_ks_spin"


def test_code_in_a_file_that_names_no_function_counts_as_hidden(tmp_path: Path) -> None:
    from sandbox.judge.libwatch import _GONE, _Files
    from sandbox.judge.perfdata import Hit

    # A static, stripped program: no section symbol table and no dynamic one.
    src, program = tmp_path / "p.c", tmp_path / "p"
    src.write_text("int main(void) { return 0; }\n")
    if shutil.which("gcc") is None or subprocess.run(["gcc", "-static", "-s", "-o", str(program), str(src)]).returncode:
        pytest.skip("no static C toolchain")
    table = table_for(program)
    assert table is not None and not len(table.starts)
    hit = Hit(pid=os.getpid(), path=str(program), inode=program.stat().st_ino, file_offset=0x1000)
    assert LibraryWatch._symbol(_Files(None), hit) is _GONE


def test_a_file_that_is_not_elf_has_no_table(tmp_path: Path) -> None:
    script = tmp_path / "x.so"
    script.write_text("#!/bin/sh\n")
    assert table_for(script) is None


def test_a_file_that_is_not_perf_data_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "perf.data"
    bogus.write_bytes(b"NOTPERF!" + bytes(200))
    with pytest.raises(PerfDataError):
        PerfData(bogus)


SPINNER = """
import ctypes, os, sys, time
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[2] == "unlink":
    os.unlink(sys.argv[1])  # the code stays mapped; its file is gone
print("ready", flush=True)
deadline = time.time() + 1.5
while time.time() < deadline:
    lib.cblas_ks_spin(200000)
time.sleep(30)
"""


def _watch(lib: Path, how: str, tmp_path: Path):
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    proc = subprocess.Popen([sys.executable, "-c", SPINNER, str(lib), how], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        watch = LibraryWatch(tmp_path, own_code=[])
        watch.start(proc.pid)
        watch.resume()
        time.sleep(1.2)
        sampled = watch.stop([re.compile(r"cblas_ks_spin")])
    finally:
        proc.kill()
        proc.wait()
    return sampled


@pytest.mark.slow
def test_samples_in_a_forbidden_function_are_counted(tmp_path: Path) -> None:
    sampled = _watch(_build(tmp_path), "keep", tmp_path)
    assert sampled.error is None, sampled.error
    assert sampled.samples > 50
    hits = {sym: n for (_, sym), n in sampled.forbidden.items()}
    assert hits.get("cblas_ks_spin", 0) > 0.5 * sampled.samples, sampled


def _reads_mappings() -> bool:
    """Whether this process may open another's /proc/PID/map_files entries (root)."""
    return os.geteuid() == 0


@pytest.mark.slow
def test_code_whose_file_was_deleted_after_loading_is_read_through_its_mapping(tmp_path: Path) -> None:
    # A kernel that builds in a temporary folder and tidies it away once loaded runs code from a deleted
    # file (red-team round 19: refused hidden-code). Read through the mapping, its functions are named;
    # where the judge may not read other processes' mappings, it stays hidden.
    sampled = _watch(_build(tmp_path), "unlink", tmp_path)
    assert sampled.error is None, sampled.error
    if _reads_mappings():
        hits = {sym: n for (_, sym), n in sampled.forbidden.items()}
        assert hits.get("cblas_ks_spin", 0) > 0.5 * sampled.samples and not sampled.hides_code(), sampled
    else:
        assert not sampled.forbidden and sampled.hides_code(), f"{sampled.hidden} hidden of {sampled.samples}"


@pytest.mark.slow
def test_a_library_replaced_under_its_name_is_not_believed(tmp_path: Path) -> None:
    lib = _build(tmp_path)
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    proc = subprocess.Popen([sys.executable, "-c", SPINNER, str(lib), "keep"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        watch = LibraryWatch(tmp_path, own_code=[])
        watch.start(proc.pid)
        watch.resume()
        time.sleep(1.2)
        # An innocent file under the same name, written after the samples were taken.
        innocent = tmp_path / "innocent"
        innocent.mkdir()
        os.replace(_build(innocent), lib)
        sampled = watch.stop([re.compile(r"cblas_ks_spin")])
    finally:
        proc.kill()
        proc.wait()
    assert sampled.error is None, sampled.error
    # Never named by the innocent file: read through its mapping, the library that ran is named; where
    # the mapping cannot be read, its code is hidden.
    innocent_names = {sym for (_, sym), _n in sampled.forbidden.items() if "ks_spin" not in sym}
    assert not innocent_names, sampled
    if _reads_mappings():
        assert sum(sampled.forbidden.values()) > 0.5 * sampled.samples, sampled
    else:
        assert not sampled.forbidden and sampled.hides_code(), sampled


def test_code_in_a_file_overwritten_so_it_reads_as_no_elf_counts_as_hidden(tmp_path: Path) -> None:
    # A red-team kernel zeroed the magic of its /tmp copy of a BLAS library after loading it: the
    # inode is the same, and the file reads as no ELF file. Code was mapped from it: it hides.
    from sandbox.judge.libwatch import _GONE, _Files
    from sandbox.judge.perfdata import Hit

    lib = _build(tmp_path)
    raw = bytearray(lib.read_bytes())
    raw[:4] = b"\0\0\0\0"
    with lib.open("r+b") as f:  # in place: the same inode
        f.write(raw)
    hit = Hit(pid=os.getpid(), path=str(lib), inode=lib.stat().st_ino, file_offset=0x1000)
    assert table_for(lib) is None
    assert LibraryWatch._symbol(_Files(None), hit) is _GONE


def test_code_no_symbol_covers_counts_as_hidden_only_where_the_candidate_can_write(tmp_path: Path) -> None:
    from sandbox.judge import libwatch
    from sandbox.judge.libwatch import _GONE, _Files
    from sandbox.judge.perfdata import Hit

    lib = _build(tmp_path)  # pytest's tmp_path lies under /tmp
    assert str(lib).startswith(libwatch.WRITABLE)
    outside = Hit(pid=os.getpid(), path=str(lib), inode=lib.stat().st_ino, file_offset=0)  # the ELF header
    assert LibraryWatch._symbol(_Files(None), outside) is _GONE
    system = Path(ctypes.util.find_library("m") and "/lib/x86_64-linux-gnu/libm.so.6")
    if system.exists():
        hit = Hit(pid=os.getpid(), path=str(system), inode=system.stat().st_ino, file_offset=0)
        assert LibraryWatch._symbol(_Files(None), hit) is None  # a system file: unnamed, not hidden


HELPER_AT_START = """
import ctypes, subprocess, sys, time
print("ready", flush=True)
sys.stdin.readline()  # the watch has started: start a helper that does the forbidden work
subprocess.run([sys.executable, "-c", "import ctypes, sys, time\\nlib = ctypes.CDLL(sys.argv[1])\\n"
                "end = time.time() + 1.5\\nwhile time.time() < end: lib.cblas_ks_spin(200000)", sys.argv[1]])
print("done", flush=True)
time.sleep(30)  # alive, as a runner is when the judge reads the samples
"""


def _helper_run(tmp_path: Path, while_watched: Callable[[LibraryWatch], None]) -> Sampled:
    """HELPER_AT_START watched from before its helper starts; `while_watched` runs once the watch is on."""
    lib = _build(tmp_path)
    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    proc = subprocess.Popen([sys.executable, "-c", HELPER_AT_START, str(lib)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None and proc.stdout.readline().strip() == "ready"
        watch = LibraryWatch(tmp_path, own_code=[])
        watch.start(proc.pid)
        watch.resume()
        assert watch.error is None and watch.proc is not None, watch.error
        while_watched(watch)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "done"
        return watch.stop([re.compile(r"cblas_ks_spin")])
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_helper_started_the_moment_sampling_starts_is_sampled(tmp_path: Path) -> None:
    # perf follows what a process starts after perf attached; a red-team kernel started its helper
    # at import, before the judge's perf had attached. The watch now returns only once perf says its
    # events are on, so a process started right after start() returns is followed.
    sampled = _helper_run(tmp_path, lambda watch: None)
    assert sampled.error is None, sampled.error
    hits = sum(sampled.forbidden.values())
    assert hits > 0.5 * sampled.samples and hits > 50, sampled


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _stopped_while_paused(watch: LibraryWatch) -> None:
    assert watch.proc is not None
    with watch.paused():
        deadline = time.monotonic() + 5
        while _state(watch.proc.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(watch.proc.pid) == "T"
    assert _state(watch.proc.pid) != "T"


def test_perf_is_stopped_while_the_judge_times_its_own_work_and_samples_after(tmp_path: Path) -> None:
    # perf 6.1 polls at a full core once a process it follows has exited; the reference, timed in the
    # judge beside it, read 32 ms instead of 0.2. It is stopped for that time, and its samples still come.
    sampled = _helper_run(tmp_path, _stopped_while_paused)
    assert sampled.error is None and sum(sampled.forbidden.values()) > 50, sampled


def test_code_in_anonymous_memory_the_kernel_names_counts_as_hidden() -> None:
    # A red-team kernel copied a BLAS image into memory taken with sbrk: its samples read `[heap]`.
    from sandbox.judge.libwatch import _GONE, _Files
    from sandbox.judge.perfdata import Hit

    for name in ("[heap]", "[stack]", "[anything]"):
        assert LibraryWatch._symbol(_Files(None), Hit(pid=os.getpid(), path=name, inode=None, file_offset=0)) is _GONE
    assert LibraryWatch._symbol(_Files(None), Hit(pid=os.getpid(), path="[vdso]", inode=None, file_offset=0)) is None


def test_a_file_on_an_in_memory_file_system_is_one_the_candidate_could_write(tmp_path: Path) -> None:
    from sandbox.judge.glimpse import in_memory as _in_memory
    from sandbox.judge.libwatch import _Files
    from sandbox.judge.perfdata import Hit

    system = Path(sys.executable).resolve()
    assert not _Files(None).writable(Hit(pid=os.getpid(), path=str(system), inode=None, file_offset=0))
    if os.path.isdir("/dev/shm") and _in_memory("/dev/shm"):
        assert _Files(None).writable(Hit(pid=os.getpid(), path="/dev/shm/x.so", inode=None, file_offset=0))
    assert _Files(None).writable(Hit(pid=os.getpid(), path="/dev/somewhere/x.so", inode=None, file_offset=0))


@pytest.mark.slow
def test_an_evaluation_started_with_sigint_blocked_still_samples() -> None:
    # A Ray worker blocks SIGINT, and a blocked signal is inherited across fork and exec: perf, which
    # the judge stops with SIGINT, ran on for its 30 s grace and its samples were lost ("not sampled").
    import signal
    import threading

    from sandbox.evaluator import EvalOptions, evaluate

    if shutil.which("perf") is None:
        pytest.skip("needs perf")
    seed = Path(__file__).resolve().parent.parent / "problems" / "vector_add" / "seeds" / "cpu.py"
    verdicts = []

    def blocked() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # this thread only: the worker inherits it
        verdicts.append(evaluate("vector_add", seed, EvalOptions(target="cpu", mode="check")))

    thread = threading.Thread(target=blocked)
    thread.start()
    thread.join()
    verdict = verdicts[0]
    assert verdict.status.value == "ok", verdict.message
    assert verdict.integrity.protections["library_use"].startswith("sampled"), verdict.integrity.protections
    assert verdict.wall_seconds < 25, verdict.wall_seconds
