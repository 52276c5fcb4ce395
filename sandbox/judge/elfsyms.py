"""Function symbols of an ELF file, looked up by file offset: which function a sample landed in.

A table is read once per file (identified by device, inode, size and modification time, so a
library replaced under the same name is read again) and kept for the judge's life: torch's
CPU library holds half a million symbols, and its table is loaded with torch's own vector
operations in well under a second; a lookup is a binary search. Names are read from the
string table only for the functions that samples hit.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import torch

_SHT_SYMTAB, _SHT_DYNSYM, _PT_LOAD, _PT_DYNAMIC = 2, 11, 1, 2
_DT_HASH, _DT_STRTAB, _DT_SYMTAB, _DT_STRSZ, _DT_GNU_HASH = 4, 5, 6, 10, 0x6FFFFEF5
_STT_FUNC, _STT_GNU_IFUNC = 2, 10
_NAME_CHUNK = 512


class NotElf(ValueError):
    """The file is not a 64-bit little-endian ELF object."""


@dataclass(frozen=True)
class _Segment:
    offset: int
    vaddr: int
    filesz: int


class SymbolTable:
    """The functions of one file, sorted by address."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Kept open: names are read later, when the process whose /proc root led here may be gone.
        self._file = f = path.open("rb")
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            f.close()
            raise NotElf(f"{path} is not a 64-bit little-endian ELF file")
        self.segments = segments(f, head)
        self.starts, self.ends, self.names, self.strtabs = _functions(f, head)
        if not len(self.starts):  # no section headers (wiped, or never written): what the loader reads
            self.starts, self.ends, self.names, self.strtabs = _dynamic_functions(f, head, self.segments)
        self._resolved: dict[int, str] = {}

    def symbol_at(self, file_offset: int) -> str | None:
        """The function whose code holds this byte of the file, or None (no symbol covers it)."""
        vaddr = self._vaddr(file_offset)
        if vaddr is None or not len(self.starts):
            return None
        i = int(torch.searchsorted(self.starts, torch.tensor([vaddr], dtype=torch.int64), right=True)[0]) - 1
        if i < 0 or vaddr >= int(self.ends[i]):
            return None
        return self._name(int(self.names[i]))

    def _vaddr(self, file_offset: int) -> int | None:
        for s in self.segments:
            if s.offset <= file_offset < s.offset + s.filesz:
                return file_offset - s.offset + s.vaddr
        return None

    def _name(self, packed: int) -> str:
        """Names are packed as (string table index << 32 | offset in it)."""
        if packed not in self._resolved:
            table_offset, table_size = self.strtabs[packed >> 32]
            at = packed & 0xFFFFFFFF
            self._file.seek(table_offset + at)
            raw = b""
            while b"\0" not in raw and len(raw) < table_size - at:
                chunk = self._file.read(_NAME_CHUNK)
                if not chunk:
                    break
                raw += chunk
            self._resolved[packed] = raw.split(b"\0", 1)[0].decode(errors="replace")
        return self._resolved[packed]


def _offset_of(segments: list[_Segment], vaddr: int) -> int | None:
    for s in segments:
        if s.vaddr <= vaddr < s.vaddr + s.filesz:
            return vaddr - s.vaddr + s.offset
    return None


def _dynamic_functions(f: BinaryIO, head: bytes, segments: list[_Segment]) -> tuple[torch.Tensor, torch.Tensor,
                                                                                    torch.Tensor, list[tuple[int, int]]]:
    """The functions of the dynamic symbol table, found as the loader finds it (PT_DYNAMIC's DT_SYMTAB,
    DT_STRTAB and a hash table for the count), for files whose section headers are gone: a library
    cannot hide the names it exports and still be called through them."""
    empty = torch.empty(0, dtype=torch.int64)
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    f.seek(phoff)
    raw = f.read(phentsize * phnum)
    dynamic = next((struct.unpack_from("<IIQQQQ", raw, i * phentsize) for i in range(phnum)
                    if struct.unpack_from("<I", raw, i * phentsize)[0] == _PT_DYNAMIC), None)
    if dynamic is None:
        return empty, empty, empty, []
    f.seek(dynamic[2])
    entries = struct.iter_unpack("<qQ", f.read(dynamic[5] - dynamic[5] % 16))
    tags = {tag: value for tag, value in entries if tag in (_DT_SYMTAB, _DT_STRTAB, _DT_STRSZ, _DT_HASH, _DT_GNU_HASH)}
    symtab, strtab = _offset_of(segments, tags.get(_DT_SYMTAB, -1)), _offset_of(segments, tags.get(_DT_STRTAB, -1))
    count = _symbol_count(f, segments, tags)
    if symtab is None or strtab is None or not count:
        return empty, empty, empty, []
    f.seek(symtab)
    table = torch.frombuffer(bytearray(f.read(24 * count)), dtype=torch.int64).view(-1, 3)
    return _sorted_functions([table], [(strtab, tags.get(_DT_STRSZ, 1 << 30))])


def _symbol_count(f: BinaryIO, segments: list[_Segment], tags: dict[int, int]) -> int:
    """How many dynamic symbols there are: DT_HASH's chain count, else past the last GNU hash chain."""
    if (at := _offset_of(segments, tags.get(_DT_HASH, -1))) is not None:
        f.seek(at)
        return int(struct.unpack("<II", f.read(8))[1])
    if (at := _offset_of(segments, tags.get(_DT_GNU_HASH, -1))) is None:
        return 0
    f.seek(at)
    nbuckets, symoffset, bloom, _shift = struct.unpack("<IIII", f.read(16))
    f.seek(at + 16 + 8 * bloom)
    buckets = struct.unpack(f"<{nbuckets}I", f.read(4 * nbuckets))
    last = max(buckets, default=0)
    if last < symoffset:
        return symoffset
    f.seek(at + 16 + 8 * bloom + 4 * nbuckets + 4 * (last - symoffset))
    while True:
        word = f.read(4)
        if len(word) < 4 or struct.unpack("<I", word)[0] & 1:
            return last + 1
        last += 1


def segments(f: BinaryIO, head: bytes, kind: int = _PT_LOAD) -> list[_Segment]:
    """The file's program headers of one kind (the loaded segments unless told): offset, address, size."""
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    f.seek(phoff)
    raw = f.read(phentsize * phnum)
    found = []
    for i in range(phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", raw, i * phentsize)
        if p_type == kind:
            found.append(_Segment(p_offset, p_vaddr, p_filesz))
    return found


def _functions(f: BinaryIO, head: bytes) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
    """Start and end addresses of every defined function of .symtab and .dynsym, and their names' places.

    A function of size 0 (hand-written assembly often declares none) reaches the next symbol."""
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
    f.seek(shoff)
    raw = f.read(shentsize * shnum)
    sections = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]
    tables, strtabs = [], []
    for sh_type, offset, size, link in ((s[1], s[4], s[5], s[6]) for s in sections):
        if sh_type not in (_SHT_SYMTAB, _SHT_DYNSYM) or link >= len(sections):
            continue
        f.seek(offset)
        tables.append(torch.frombuffer(bytearray(f.read(size - size % 24)), dtype=torch.int64).view(-1, 3))
        strtabs.append((sections[link][4], sections[link][5]))
    return _sorted_functions(tables, strtabs)


def _sorted_functions(tables: list[torch.Tensor], strtabs: list[tuple[int, int]]) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
    """The defined functions of symbol tables (rows of 24 bytes), sorted by address, with their names'
    places (string table index << 32 | offset in it)."""
    starts, ends, names = [], [], []
    for index, table in enumerate(tables):
        word, value, length = table[:, 0], table[:, 1], table[:, 2]
        kind = (word >> 32) & 0xF
        defined = ((word >> 48) & 0xFFFF) != 0
        keep = ((kind == _STT_FUNC) | (kind == _STT_GNU_IFUNC)) & defined & (value != 0)
        starts.append(value[keep])
        ends.append(value[keep] + length[keep])
        names.append((word[keep] & 0xFFFFFFFF) | index << 32)
    if not starts:
        empty = torch.empty(0, dtype=torch.int64)
        return empty, empty, empty, strtabs
    start, end, name = torch.cat(starts), torch.cat(ends), torch.cat(names)
    order = torch.argsort(start)
    start, end, name = start[order], end[order], name[order]
    # Size-0 functions end where the next one starts.
    following = torch.cat([start[1:], torch.tensor([2**62], dtype=torch.int64)])
    end = torch.where(end == start, following, end)
    return start, end, name, strtabs


_TABLES: dict[tuple[int, int, int, int], SymbolTable | None] = {}


def table_for(path: Path) -> SymbolTable | None:
    """The file's table, read once per identity; None where it is no ELF file (a script, a data file)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _TABLES:
        try:
            _TABLES[key] = SymbolTable(path)
        except (NotElf, struct.error, RuntimeError):
            _TABLES[key] = None
    return _TABLES[key]


def function_ranges(table: SymbolTable) -> list[tuple[str, int, int]]:
    """Every function of the table once (aliases share a start), as (name, file offset, size), for reading
    their code; the string tables are read whole, once."""
    strings: dict[int, bytes] = {}
    ranges, seen = [], set()
    for start, end, packed in zip(table.starts.tolist(), table.ends.tolist(), table.names.tolist(), strict=True):
        offset = _offset_of(table.segments, start)
        if start in seen or offset is None or end <= start or end - start > 1 << 30:
            continue
        seen.add(start)
        index = packed >> 32
        if index not in strings:
            table_offset, table_size = table.strtabs[index]
            table._file.seek(table_offset)
            strings[index] = table._file.read(min(table_size, 1 << 30))
        text = strings[index]
        at = packed & 0xFFFFFFFF
        name = text[at:text.find(b"\0", at)].decode(errors="replace") if at < len(text) else ""
        ranges.append((name, offset, end - start))
    return ranges
