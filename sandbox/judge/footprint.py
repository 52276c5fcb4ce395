"""A forbidden library's pages in the runner's page tables: what the library ran, seen without perf.

The kernel maps a page of a library's file into a process only when the process touches that page,
and a process touches the pages of a library's code, and of the device code it carries, by running
it. So the judge reads which pages of each library the problem forbids (`forbidden_libraries`:
patterns over file names) the runner's processes have mapped: once before the candidate loads, after
the calibration has run every path of the runner's own, and again after the checks and after the
timing (`Footprint`). Pages mapped since the first reading are the library's code run by the
candidate's calls. Nothing in the runner's process keeps this record, so nothing there can switch it
off, and it needs no perf: the GPU hosts here have none, and perf never sees device code anyway.

Measured on the lent H100 (torch 2.11, CUDA 13): torch's import left 50 MB of cuBLASLt's executable
segment mapped in a process; one bf16 product through torch mapped 4.6 MB more of it, a float32 product
5.4 MB more, while elementwise operations, a softmax, a reduction, device events and a Triton kernel
mapped none. Only pages of the sections that hold code (host code, and the device code of `.nv_fatbin`)
count: the sections the dynamic loader reads to bind a later library's symbols (`.dynsym`,
`.gnu.hash`, ...) are touched without running any of the library. A copy of a forbidden library under
another name, known by its build ID or by its sections' names and sizes, counts as soon as any page of it
is mapped: no honest kernel loads one, and its file is the candidate's to rewrite.

What this cannot see is in docs/INTEGRITY.md (What remains): pages dropped from the page tables after
use (the runner's seccomp filter allows only `madvise` advice that keeps them, and no `process_madvise`;
mapping the library again over itself is not refused), and a process that exited before the judge's last
reading.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import BinaryIO

import torch

from sandbox.judge import procs
from sandbox.judge.elfsyms import segments
from sandbox.judge.glimpse import Mapping, file_mappings

logger = logging.getLogger(__name__)

PAGE = os.sysconf("SC_PAGE_SIZE")
# Pages newly mapped before the library counts as run: one fault maps up to 16 neighbouring pages
# that are in the page cache (the kernel's fault-around), and one product through cuBLAS mapped over 1,000.
GROWN_PAGES = 16
_SHF_EXECINSTR, _SHT_NOTE, _SHT_NOBITS, _PT_NOTE, _NT_GNU_BUILD_ID = 0x4, 7, 8, 4, 3
# Sections of device code, which the CUDA runtime reads from the library's file as the code is loaded.
_DEVICE_CODE = (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment")


@dataclass(frozen=True)
class _Layout:
    """What the judge knows of a library's file: what it is whatever its name, and which of its pages hold code."""

    identities: frozenset[bytes]  # its build ID and a digest of its sections' names, kinds and sizes, where it has them
    code_pages: torch.Tensor | None  # bool per page of the file; None: the sections are unreadable, all count


@dataclass
class Footprint:
    """Pages of forbidden libraries mapped in the runner's processes, by library file."""

    patterns: list[re.Pattern[str]]
    names: dict[str, str] = field(default_factory=dict)  # library key -> the file name it was first seen under
    forbidden_ids: set[bytes] = field(default_factory=set)  # identities of the libraries matched by name
    copies: set[str] = field(default_factory=set)  # keys of copies of those under other names (`_library`)
    # Files mapped before the candidate loaded and not forbidden: the environment's, no copy of anything
    # the candidate made, so never read again (reading every library's headers each time cost 90 ms).
    settled: set[tuple[int, str]] = field(default_factory=set)
    baseline: dict[str, torch.Tensor] | None = None
    grown: dict[str, int] = field(default_factory=dict)  # library key -> pages newly mapped, the most seen

    @classmethod
    def of(cls, patterns: list[str]) -> Footprint | None:
        """A footprint of the libraries whose file names match `patterns`; None where nothing is forbidden."""
        return cls([re.compile(p) for p in patterns]) if patterns else None

    def start(self, root: int) -> None:
        """The pages mapped now in the sandbox below `root`: whatever is mapped later was run for the candidate."""
        self.baseline = self._read(root, first=True)

    def read(self, root: int) -> None:
        """Compare the pages mapped now with the first reading; the growth is kept, library by library."""
        if self.baseline is None:
            return
        for key, pages in self._read(root).items():
            before = self.baseline.get(key)
            new = pages & ~before if before is not None and before.numel() == pages.numel() else pages
            self.grown[key] = max(self.grown.get(key, 0), int(new.sum()))

    def run(self) -> dict[str, int]:
        """The forbidden libraries whose code the candidate's calls ran: file name -> pages newly mapped. A copy
        counts once any page of it is mapped: no honest kernel loads one, and a copy's own file is the
        candidate's to rewrite (red-team round 24 cleared its sections' executable flags, or punched the
        pages it ran out of the file and wrote them back)."""
        return {self.names[k]: n for k, n in self.grown.items() if n >= (1 if k in self.copies else GROWN_PAGES)}

    def describe(self) -> str:
        libraries = ", ".join(f"{name} ({n * PAGE // 1024} KB)" for name, n in sorted(self.run().items()))
        return (f"pages of {libraries} were mapped into the runner after the candidate loaded: that library's code "
                "ran for the candidate")

    # -- reading the page tables -------------------------------------------------------------

    def _read(self, root: int, first: bool = False) -> dict[str, torch.Tensor]:
        found: dict[str, torch.Tensor] = {}
        for pid in [root, *procs.descendants(root)]:
            for mapping in file_mappings(pid):
                if (mapping.inode, mapping.path) in self.settled:
                    continue
                found_as = self._library(pid, mapping, first)
                if found_as is None:
                    continue
                key, layout = found_as
                pages = _present(pid, mapping, layout)
                if pages is None:
                    continue
                held = found.get(key)
                if held is None or held.numel() < pages.numel():
                    pages = pages.clone()
                    if held is not None:
                        pages[:held.numel()] |= held
                    found[key] = pages
                else:
                    held[:pages.numel()] |= pages
        return found

    def _library(self, pid: int, mapping: Mapping, first: bool = False) -> tuple[str, _Layout | None] | None:
        """The library a mapping is of, if forbidden, and the layout whose code pages count: by its file's name
        (keyed by the file), or as a copy of one so named, known by its build ID or its sections (keyed apart:
        `copies`; every page of it counts, so no layout). On the `first` reading, a file not so named is the
        environment's (`settled`)."""
        name = os.path.basename(mapping.path)
        if any(p.search(name) for p in self.patterns):
            layout = self._layout_of(pid, mapping)
            self.forbidden_ids |= layout.identities if layout is not None else frozenset()
            key = f"{mapping.inode}:{mapping.path}"
        elif first:
            self.settled.add((mapping.inode, mapping.path))
            return None
        else:
            layout = self._layout_of(pid, mapping)
            if layout is None or not layout.identities & self.forbidden_ids:
                return None
            key, layout = f"copy {mapping.inode}:{mapping.path}", None
            self.copies.add(key)
        self.names.setdefault(key, name)
        return key, layout

    @staticmethod
    def _layout_of(pid: int, mapping: Mapping) -> _Layout | None:
        where = f"/proc/{pid}/map_files/{mapping.start:x}-{mapping.end:x}"
        for path in (where, f"/proc/{pid}/root{mapping.path}"):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_ino == mapping.inode:
                return _layout(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        return None


def _present(pid: int, mapping: Mapping, layout: _Layout | None) -> torch.Tensor | None:
    """Per page of the library's file: whether this mapping has it in `pid`'s page tables and it holds code."""
    count = (mapping.end - mapping.start) // PAGE
    try:
        with open(f"/proc/{pid}/pagemap", "rb", buffering=0) as f:
            f.seek(mapping.start // PAGE * 8)
            raw = f.read(count * 8)
    except OSError:
        return None
    entries = torch.frombuffer(bytearray(raw), dtype=torch.int64) if raw else torch.zeros(0, dtype=torch.int64)
    first = mapping.offset // PAGE
    pages = torch.zeros(first + entries.numel(), dtype=torch.bool)
    pages[first:] = entries < 0  # bit 63: the page is present
    if layout is not None and layout.code_pages is not None:
        code = torch.zeros_like(pages)
        width = min(code.numel(), layout.code_pages.numel())
        code[:width] = layout.code_pages[:width]
        pages &= code
    return pages


@lru_cache(maxsize=64)
def _layout(path: str, dev: int, inode: int, size: int, mtime_ns: int) -> _Layout:
    """A file's build ID and code pages, read once per file (its device, inode, size and change time)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return _Layout(frozenset(), None)
            sections = _sections(f, head)
            notes = [(offset, length) for _, kind, _, offset, length in sections if kind == _SHT_NOTE]
            build_id = _build_id(f, notes or [(n.offset, n.filesz) for n in segments(f, head, _PT_NOTE)])
            # Two names for what the file is, either of which a copy keeps unless it rewrites it: a library
            # rebuilt by patchelf may carry no build ID (numpy's OpenBLAS), and a byte of one is easily flipped.
            layout = hashlib.sha256(repr([(n, k, size) for n, k, _, _, size in sections]).encode()).digest()
            return _Layout(frozenset([*([build_id] if build_id else []), *([layout] if sections else [])]),
                           _code_pages(sections, size))
    except (OSError, struct.error, ValueError) as exc:
        logger.debug("cannot read %s: %s", path, exc)
        return _Layout(frozenset(), None)


def _sections(f: BinaryIO, head: bytes) -> list[tuple[str, int, int, int, int]]:
    """The file's sections as (name, type, flags, offset, size); none where its section headers are gone."""
    shoff, = struct.unpack_from("<Q", head, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 58)
    if not shoff or not shnum or shstrndx >= shnum:
        return []
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    f.seek(headers[shstrndx][4])
    strings = f.read(min(headers[shstrndx][5], 1 << 20))
    return [(strings[at:strings.find(b"\0", at)].decode(errors="replace"), kind, flags, offset, length)
            for at, kind, flags, _, offset, length in headers]


def _build_id(f: BinaryIO, notes: list[tuple[int, int]]) -> bytes | None:
    """The GNU build ID among the file's notes, where it has one."""
    for offset, length in notes:
        if length > 1 << 16:
            continue
        f.seek(offset)
        data, at = f.read(length), 0
        while at + 12 <= len(data):
            namesz, descsz, kind = struct.unpack_from("<III", data, at)
            name_at = at + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            if kind == _NT_GNU_BUILD_ID and data[name_at:name_at + namesz].rstrip(b"\0") == b"GNU":
                return bytes(data[desc_at:desc_at + descsz])
            at = desc_at + (descsz + 3) // 4 * 4
    return None


def _code_pages(sections: list[tuple[str, int, int, int, int]], size: int) -> torch.Tensor | None:
    """Per page of the file: whether it holds some of a section of code (host or device); None without sections."""
    if not sections:
        return None
    pages = torch.zeros((size + PAGE - 1) // PAGE, dtype=torch.bool)
    for name, kind, flags, offset, length in sections:
        if kind == _SHT_NOBITS or not length or not (flags & _SHF_EXECINSTR or name in _DEVICE_CODE):
            continue
        pages[offset // PAGE:(offset + length - 1) // PAGE + 1] = True
    return pages
