"""The judge tells a forbidden library's use by the pages of it a process maps (sandbox/judge/footprint.py).

Each test drives a child Python, as the runner would be, and reads its page tables from outside, as the
judge does: the library here is numpy's OpenBLAS, which every CPU host of this project carries.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import platform
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.judge.footprint import GROWN_PAGES, Footprint

ROOT = Path(__file__).resolve().parent.parent
_LOOP = "import sys\nfor line in sys.stdin:\n    exec(eval(line))\n    print('ok', flush=True)\n"


class _Child:
    """A Python process that runs the snippets it is sent, one at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _LOOP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=ROOT)

    def run(self, code: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(repr(code) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok", f"the child failed on {code!r}"


@pytest.fixture
def child() -> Iterator[_Child]:
    process = _Child()
    process.run("import numpy as np, ctypes, glob, os, shutil, tempfile")
    process.run("a = np.random.rand(192, 192).astype(np.float32); b = a + 1")
    yield process
    process.proc.kill()
    process.proc.wait()


def _openblas() -> str:
    import numpy as np

    found = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*.so*"))
    if not found:
        pytest.skip("this numpy carries no OpenBLAS of its own")
    return os.path.realpath(found[0])


def _watching(child: _Child) -> Footprint:
    footprint = Footprint.of(["(?i)openblas"])
    assert footprint is not None
    footprint.start(child.proc.pid)
    return footprint


def test_a_forbidden_library_run_after_the_first_reading_is_named(child: _Child) -> None:
    # numpy's elementwise work runs no BLAS; its product does. Only the product's pages are new.
    _openblas()
    footprint = _watching(child)
    child.run("c = a * b + a; d = np.exp(a).sum(axis=0)")
    footprint.read(child.proc.pid)
    assert footprint.run() == {}, footprint.grown
    child.run("c = a @ b")
    footprint.read(child.proc.pid)
    (name, pages), = footprint.run().items()
    assert "openblas" in name.lower() and pages >= GROWN_PAGES
    assert "openblas" in footprint.describe().lower()


def test_a_renamed_copy_of_a_forbidden_library_is_still_that_library(child: _Child, tmp_path: Path) -> None:
    # Named by neither pattern nor path, the copy is known by what the file is (its build ID, or its
    # sections' names and sizes where patchelf left it none).
    source = _openblas()
    footprint = _watching(child)
    copy = tmp_path / "libtile_helpers.so"
    names = [n for n in ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm") if hasattr(ctypes.CDLL(source), n)]
    if not names:
        pytest.skip("no sgemm entry point known in this OpenBLAS")
    child.run(
        f"shutil.copyfile({source!r}, {str(copy)!r}); lib = ctypes.CDLL({str(copy)!r})\n"
        "c = np.zeros((192, 192), np.float32); f = getattr(lib, %r); I = ctypes.c_int64 if '64' in %r else ctypes.c_int\n"
        "f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, I, I, I, ctypes.c_float, ctypes.c_void_p, I,"
        " ctypes.c_void_p, I, ctypes.c_float, ctypes.c_void_p, I]\n"
        "f(101, 111, 111, 192, 192, 192, 1.0, a.ctypes.data, 192, b.ctypes.data, 192, 0.0, c.ctypes.data, 192)\n"
        "assert np.allclose(c, (a[:, :, None] * b[None, :, :]).sum(1), rtol=1e-3)" % (names[0], names[0]))
    footprint.read(child.proc.pid)
    assert "libtile_helpers.so" in footprint.run(), footprint.grown


def test_a_copy_counts_once_mapped_whatever_its_section_headers_say(child: _Child, tmp_path: Path) -> None:
    # Red-team round 24 cleared the executable flag of every section of a copy (the loader reads program
    # headers, not sections): no page of it held code by its sections, and its product ran unseen.
    source = _openblas()
    footprint = _watching(child)
    copy = tmp_path / "libplain.so"
    raw = bytearray(Path(source).read_bytes())
    shoff, = struct.unpack_from("<Q", raw, 40)
    shentsize, shnum = struct.unpack_from("<HH", raw, 58)
    for i in range(shnum):  # sh_flags, 8 bytes in: SHF_EXECINSTR (4) cleared
        at = shoff + i * shentsize + 8
        struct.pack_into("<Q", raw, at, struct.unpack_from("<Q", raw, at)[0] & ~4)
    copy.write_bytes(raw)
    child.run(f"lib = ctypes.CDLL({str(copy)!r})")
    footprint.read(child.proc.pid)
    assert "libplain.so" in footprint.run(), footprint.grown


def test_the_loaders_reading_of_a_librarys_symbols_is_not_its_code_running(child: _Child) -> None:
    # Binding a later library's symbols, or looking names up, reads the library's symbol tables and hash
    # (sections the loader reads) and runs none of its code.
    source = _openblas()
    footprint = _watching(child)
    child.run(f"lib = ctypes.CDLL({source!r})\n"
              "import re\nnames = re.findall(rb'[a-z_][a-z0-9_]{4,40}', open(%r, 'rb').read()[-3000000:])[:4000]\n"
              "found = sum(hasattr(lib, n.decode()) for n in names)" % source)
    footprint.read(child.proc.pid)
    assert footprint.run() == {}, footprint.grown


def test_nothing_is_watched_where_the_problem_forbids_no_library() -> None:
    assert Footprint.of([]) is None


def test_the_runner_may_not_drop_the_pages_the_judge_reads_a_library_by() -> None:
    # A kernel that ran the library and then dropped its pages (madvise DONTNEED) would leave the page
    # tables as the judge first read them: the runner's filter allows only advice that keeps them, and no
    # process_madvise.
    from sandbox.runner import seccomp

    if not seccomp.program():
        pytest.skip(f"no system-call filter for {platform.machine()}")
    probe = (
        "import ctypes, mmap, os\n"
        "from sandbox.runner import seccomp\n"
        "print(seccomp.install())\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"
        "page = mmap.mmap(-1, mmap.PAGESIZE)\n"
        "address = ctypes.addressof(ctypes.c_char.from_buffer(page))\n"
        "for advice in (4, 21, 102, 3, 14):\n"
        "    print('advice', advice, libc.madvise(address, mmap.PAGESIZE, advice), ctypes.get_errno())\n"
        "vector = (ctypes.c_uint64 * 2)(address, mmap.PAGESIZE)\n"
        "pidfd = os.pidfd_open(os.getpid())\n"
        "print('process_madvise', libc.syscall(440, pidfd, vector, 1, 21, 0), ctypes.get_errno())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert "advice that drops mapped pages" in out, out
    for dropping in (4, 21, 102):  # DONTNEED, PAGEOUT, GUARD_INSTALL (round 24: its removal drops pages)
        assert f"advice {dropping} -1 {errno.EPERM}" in out, out
    assert "advice 3 0" in out and "advice 14 " in out, out  # WILLNEED, HUGEPAGE: allowed (HUGEPAGE may be unsupported)
    assert f"process_madvise -1 {errno.EPERM}" in out, out  # round 24: the same advice to its own memory
