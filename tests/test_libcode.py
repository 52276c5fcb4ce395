"""Library code recognised by its bytes: an index of the functions a problem forbids, matched against
the code around a sample wherever it lies and whatever it is named (`sandbox/judge/libcode.py`)."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.judge import libcode
from sandbox.judge.elfsyms import SymbolTable, function_ranges, table_for
from sandbox.judge.glimpse import Glimpses
from sandbox.judge.libwatch import LibraryWatch, Sampled, _Files
from sandbox.judge.perfdata import Hit

FORBIDDEN = [re.compile("(?i)gemm")]


def _function(name: str, seed: int) -> str:
    """A C function of a few kilobytes whose immediates, drawn from `seed`, make its bytes its own."""
    draw = random.Random(seed)
    body = [f"    a = (a * {draw.randrange(3, 1 << 30)}L) ^ (x[i + {j}] + {draw.randrange(1 << 30)}L); "
            f"b += a >> {j % 13 + 1};" for j in range(60)]
    return "\n".join([f"long {name}(const long *x, long n) {{", "  long a = 1, b = 2;",
                      "  for (long i = 0; i + 64 < n; i++) {", *body, "  }", "  return a + b;", "}"])


def _library(tmp_path: Path, name: str, functions: dict[str, int]) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    src, lib = tmp_path / f"{name}.c", tmp_path / f"lib{name}.so"
    src.write_text("\n".join(_function(fn, seed) for fn, seed in functions.items()))
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def _code(lib: Path, name: str) -> tuple[int, bytes]:
    """A function's file offset and bytes."""
    table = SymbolTable(lib)
    offset, size = next((o, s) for n, o, s in function_ranges(table) if n == name)
    return offset, lib.read_bytes()[offset:offset + size]


def test_runs_are_kept_by_their_content_wherever_the_code_lies() -> None:
    draw = random.Random(1)
    code = bytes(draw.randrange(256) for _ in range(4000))
    runs = set(libcode.shingles(code).tolist())
    assert 4000 / libcode.KEEP / 2 < len(runs) < 4000 / libcode.KEEP * 2
    for shift in (1, 3, 8, 61):
        moved = set(libcode.shingles(b"\x90" * shift + code + b"\xcc" * shift).tolist())
        assert runs <= moved


def test_a_forbidden_functions_code_is_recognised_under_another_name_and_place(tmp_path: Path) -> None:
    lib = _library(tmp_path, "blas", {"fake_sgemm_kernel": 1, "fake_helper": 2})
    index = libcode.build(FORBIDDEN, [lib])
    _offset, code = _code(lib, "fake_sgemm_kernel")
    pasted = bytearray(b"\x55\x48\x89\xe5" * 9 + code + b"\xc3")
    for at in range(100, len(pasted), 700):  # a few displacements re-pointed, as a paste into a build does
        pasted[at:at + 4] = b"\x00\x10\x00\x00"
    count, owner = index.matches(pasted)
    assert count >= libcode.MATCH
    assert owner == f"fake_sgemm_kernel ({lib.name})"


def test_code_of_the_same_shape_with_its_own_constants_is_not_library_code(tmp_path: Path) -> None:
    lib = _library(tmp_path, "blas", {"fake_sgemm_kernel": 1, "fake_helper": 2})
    own = _library(tmp_path, "own", {"my_kernel": 3})
    index = libcode.build(FORBIDDEN, [lib])
    assert index.matches(_code(own, "my_kernel")[1])[0] < libcode.MATCH
    assert index.matches(_code(lib, "fake_helper")[1])[0] < libcode.MATCH


def test_runs_the_librarys_other_functions_hold_too_are_no_evidence(tmp_path: Path) -> None:
    """A template instantiated for a forbidden function and for an allowed one compiles to the same code."""
    lib = _library(tmp_path, "twins", {"twin_gemm": 7, "twin_helper": 7})
    index = libcode.build(FORBIDDEN, [lib])
    assert index.matches(_code(lib, "twin_gemm")[1])[0] == 0


def test_the_index_is_stored_and_read_back_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _library(tmp_path, "blas", {"fake_sgemm_kernel": 1, "fake_helper": 2})
    monkeypatch.setattr(libcode, "library_files", lambda: iter([lib]))
    monkeypatch.setattr(libcode, "_HOST", [])
    monkeypatch.setattr(libcode, "_LOADED", {})
    built = libcode.index_for(FORBIDDEN, tmp_path / "index")
    monkeypatch.setattr(libcode, "_LOADED", {})
    read = libcode.index_for(FORBIDDEN, tmp_path / "index")
    assert read is not built and read.names == built.names
    assert bool((read.hashes == built.hashes).all()) and bool((read.owners == built.owners).all())
    stored = next((tmp_path / "index").glob("*.names"))
    stored.write_text(stored.read_text().removesuffix("end"))  # cut short: never believed
    assert libcode._read(stored.with_suffix(""), FORBIDDEN) is None


def test_a_librarys_other_code_is_read_once_and_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _library(tmp_path, "twins", {"twin_gemm": 7, "twin_helper": 7, "other_gemm": 8})
    monkeypatch.setattr(libcode, "library_files", lambda: iter([lib]))
    monkeypatch.setattr(libcode, "_HOST", [])
    monkeypatch.setattr(libcode, "_LOADED", {})
    index = libcode.index_for(FORBIDDEN, tmp_path / "index")
    assert not index.verified
    assert index.matches(_code(lib, "other_gemm")[1])[0] >= libcode.MATCH  # its own code: still counts
    assert index.verified == {str(lib)}
    assert index.matches(_code(lib, "twin_gemm")[1])[0] == 0
    monkeypatch.setattr(libcode, "_LOADED", {})
    again = libcode.index_for(FORBIDDEN, tmp_path / "index")
    assert again.verified == {str(lib)} and bool((again.shared == index.shared).all())


def test_a_renamed_copy_of_a_library_in_tmp_is_that_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red-team round 18: numpy's OpenBLAS copied to /tmp with `gemm` rewritten to `gxmm` in its names."""
    lib = _library(tmp_path, "blas", {"fake_sgemm_kernel": 1, "fake_helper": 2})
    monkeypatch.setattr(libcode, "library_files", lambda: iter([lib]))
    monkeypatch.setattr(libcode, "_HOST", [])
    monkeypatch.setattr(libcode, "_LOADED", {})
    monkeypatch.setenv("KS_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "copy" / "libnotblas.so"
    copy.parent.mkdir()
    copy.write_bytes(lib.read_bytes().replace(b"fake_sgemm_kernel", b"fake_sgxmm_kernel"))
    offset, code = _code(lib, "fake_sgemm_kernel")
    inode = copy.stat().st_ino
    hits = [Hit(pid=os.getpid(), path=str(copy), file_offset=offset + at, inode=inode) for at in (64, 900, 1700)]
    watch = LibraryWatch(tmp_path, own_code=[])
    files = _Files(None)
    symbols = [watch._symbol(files, hit) for hit in hits]
    assert symbols == ["fake_sgxmm_kernel"] * 3
    result = watch.classify(((hit.path, symbol) for hit, symbol in zip(hits, symbols, strict=True)), FORBIDDEN)
    assert not result.forbidden  # by its names, nothing
    watch._by_content(files, hits, symbols, FORBIDDEN, result, Glimpses())
    assert sum(result.forbidden.values()) == 3
    assert "fake_sgemm_kernel (libblas.so)'s code (named fake_sgxmm_kernel here)" in result.describe()


def test_the_candidates_own_build_is_looked_at_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red-team round 18: the library's machine code pasted into the C++ the judge built."""
    lib = _library(tmp_path, "blas", {"fake_sgemm_kernel": 1, "fake_helper": 2})
    monkeypatch.setattr(libcode, "library_files", lambda: iter([lib]))
    monkeypatch.setattr(libcode, "_HOST", [])
    monkeypatch.setattr(libcode, "_LOADED", {})
    monkeypatch.setenv("KS_CACHE_DIR", str(tmp_path / "cache"))
    built = tmp_path / "build"
    built.mkdir()
    # tile_mac: the library's code, renamed; the filler keeps the two kernels' surroundings apart
    own = _library(built, "own", {"my_kernel": 3, "filler_a": 4, "filler_b": 5, "tile_mac": 1})
    watch = LibraryWatch(tmp_path, own_code=[str(built)])
    files = _Files(None)
    for name, counted in (("tile_mac", True), ("my_kernel", False)):
        offset, _code_bytes = _code(own, name)
        hits = [Hit(pid=os.getpid(), path=str(own), file_offset=offset + 200, inode=own.stat().st_ino)]
        result = Sampled()
        watch._by_content(files, hits, [watch._symbol(files, hits[0])], FORBIDDEN, result, Glimpses())
        assert bool(result.forbidden) is counted, name
    assert table_for(own) is not None


def _loaded_in_child(lib: Path, shared: bool) -> subprocess.Popen[str]:
    """A process that loads `lib` (with `shared`, also maps it writable and shared), says so, and on each
    line it reads writes the file's first bytes again, then says so."""
    probe = ("import ctypes, mmap, sys\n"
             f"path = {str(lib)!r}\n"
             "lib = ctypes.CDLL(path)\n"
             "opened = open(path, 'r+b')\n"
             f"keep = mmap.mmap(opened.fileno(), 0) if {shared} else None\n"
             "print('loaded', flush=True)\n"
             "while sys.stdin.readline():\n"
             "    open(path, 'r+b').write(b'\\x7fELF')\n"
             "    print('written', flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", probe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "loaded"
    return child


@pytest.mark.parametrize("folder", ["plain", "new\nline"])
def test_a_glimpse_sees_code_running_from_a_writable_file_and_any_later_write(tmp_path: Path, folder: str) -> None:
    """A file under /tmp is the candidate's to write while its code runs: a glimpse keeps what ran and
    the file's change time, by inode (red-team round 19: a newline in the folder's name is written
    `\\012` in /proc's listing of mappings, and a glimpse that went by path text found nothing)."""
    from sandbox.judge.glimpse import Glimpses

    (tmp_path / folder).mkdir()
    lib = _library(tmp_path / folder, "own", {"my_kernel": 3})
    child = _loaded_in_child(lib, shared=False)
    try:
        glimpses = Glimpses()
        glimpses.take(child.pid)
        if glimpses.unreadable:
            pytest.skip(f"this host lets no process read another's memory: {glimpses.unreadable}")
        inode = lib.stat().st_ino
        offset, code = _code(lib, "my_kernel")
        seen = glimpses.code(inode, offset, offset + len(code))
        assert seen is not None and seen[1] == code[seen[0] - offset:]
        assert glimpses.doubt(child.pid, str(lib), inode) is None
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "written"
        assert glimpses.doubt(child.pid, str(lib), inode) == "written while its code ran"
    finally:
        child.kill()
        child.wait()


def test_code_whose_file_is_also_mapped_writable_and_shared_is_not_vouched_for(tmp_path: Path) -> None:
    """Red-team round 19: on tmpfs a write through a dirty shared page moves no change time."""
    from sandbox.judge.glimpse import Glimpses

    lib = _library(tmp_path, "own", {"my_kernel": 3})
    child = _loaded_in_child(lib, shared=True)
    try:
        glimpses = Glimpses()
        glimpses.take(child.pid)
        assert glimpses.doubt(child.pid, str(lib), lib.stat().st_ino) == "mapped writable and shared beside its code"
    finally:
        child.kill()
        child.wait()


def test_code_a_glimpse_left_unread_is_not_vouched_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red-team round 19: 272 MB of filler mapped first spent the glimpse's reading on it."""
    from sandbox.judge import glimpse

    monkeypatch.setattr(glimpse, "MAX_BYTES", 0)
    lib = _library(tmp_path, "own", {"my_kernel": 3})
    child = _loaded_in_child(lib, shared=False)
    try:
        glimpses = glimpse.Glimpses()
        glimpses.take(child.pid)
        doubt = glimpses.doubt(child.pid, str(lib), lib.stat().st_ino)
        assert doubt == "more code in writable files than a glimpse reads"
    finally:
        child.kill()
        child.wait()


def test_the_host_libraries_are_walked_again_once_a_folder_changes(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The walk is kept between evaluations; a library added anywhere below, or one changed in place, is seen.
    root, kept = tmp_path / "lib", tmp_path / "kept"
    (root / "deep" / "er").mkdir(parents=True)
    (root / "libone.so").write_bytes(b"one")
    monkeypatch.setattr(libcode, "_roots", lambda: [(str(root), str(root))])
    libcode.preload(kept)
    files, first = libcode._HOST[0]
    assert [p.name for p in files] == ["libone.so"]
    libcode.preload(kept)
    assert libcode._HOST[0] == (files, first)  # nothing changed: the kept walk, the same identity
    (root / "deep" / "er" / "libtwo.so.1").write_bytes(b"two")
    libcode.preload(kept)
    assert sorted(p.name for p in libcode._HOST[0][0]) == ["libone.so", "libtwo.so.1"]
    second = libcode._HOST[0][1]
    (root / "libone.so").write_bytes(b"one, rewritten in place")
    libcode.preload(kept)
    assert libcode._HOST[0][1] not in (first, second)
    for text in ("{not json", '{"folders": {}, "files": []}'):  # unreadable, or a list that checks no folder
        for stored in kept.iterdir():
            stored.write_text(text)
        libcode.preload(kept)
        assert sorted(p.name for p in libcode._HOST[0][0]) == ["libone.so", "libtwo.so.1"]
