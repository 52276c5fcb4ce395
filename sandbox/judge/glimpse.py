"""The runner's code as it ran: executable pages of files the candidate can write, read from its
memory in the middle of a batch.

Library code is recognised by the bytes around each sample (`libcode`), read after the run from the
file the code was mapped from. A file in the runner's private /tmp stays writable while it is mapped,
and a private mapping's pages show what the file holds now, not what it held: a kernel could write a
library's code into its file for the length of each call and put other bytes back before it returns,
and the file read after the run would show none of it. (Pages of code cannot be changed in memory
itself: a CPU runner may not make written memory executable, `runner/seccomp.py`.) Memory cannot be
read as it was at every sample, but it can be at a moment the candidate cannot foresee: once per timed
shape, at a secret point within a batch, the judge reads every executable mapping of such a file in
every process of the runner's sandbox. Afterwards a sample's bytes are looked up in what was seen
then as well as in the file, and a file that no longer holds what was seen running from it is code
that cannot be checked.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

from sandbox.judge import procs

# Where the runner can write files (its private in-memory folders); `writable` also asks the file
# system, since every folder the sandbox lets it write is in memory.
WRITABLE = ("/tmp/", "/dev/shm/", "/var/tmp/", "/dev/")
IN_MEMORY_FS = (0x01021994, 0x858458F6)  # tmpfs, ramfs (statfs's f_type)
MAX_BYTES = 256 << 20  # read at most this much code at one glimpse


class _StatFs(ctypes.Structure):
    """struct statfs, as far as its first field (os.statvfs leaves the file system's type out)."""

    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_long * 15)]


def in_memory(path: str) -> bool:
    """Whether `path` lies on a tmpfs or ramfs (the file system types of the sandbox's own folders)."""
    buf = _StatFs()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), path)
    return buf.f_type in IN_MEMORY_FS


def writable(pid: int, path: str) -> bool:
    """Whether the candidate could write the file `path` as process `pid` sees it: one under its private
    folders, or on an in-memory file system, which every writable place of the sandbox is and nothing
    it reads from the host is."""
    if path.startswith(WRITABLE):
        return True
    try:
        return in_memory(f"/proc/{pid}/root{path}")
    except OSError:
        return True  # a file that cannot be looked at is vouched for by nothing


@dataclass
class Glimpses:
    """Code seen running from writable files, by inode (never by path: a path's text can be made to
    read differently in /proc's listings and in perf's records): the file offsets and bytes read, each
    file's change time when first seen, and the files no glimpse can vouch for."""

    pages: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    changed_at: dict[int, int] = field(default_factory=dict)
    # Files mapped writable and shared beside their code (a write through such a page moves no change time
    # once the page is dirty), files whose code a glimpse left unread, and files it could not look at.
    unvouched: dict[int, str] = field(default_factory=dict)
    taken: int = 0
    unreadable: list[str] = field(default_factory=list)

    def take(self, root: int) -> None:
        """Look at the executable mappings of writable files in `root` and every process below it: first
        what costs a stat each (change times, shared writable mappings), then their bytes."""
        self.taken += 1
        mappings = [(pid, m) for pid in [root, *procs.descendants(root)] for m in file_mappings(pid)]
        code = [(pid, m) for pid, m in mappings if m.executable and writable(pid, m.path)]
        executable = {m.inode for _pid, m in code}
        for pid, m in code:
            if m.inode not in self.changed_at:
                changed = _change_time(pid, m.path, m.inode)
                if changed is None:
                    self.unvouched.setdefault(m.inode, "no change time could be read")
                else:
                    self.changed_at[m.inode] = changed
        for _pid, m in mappings:
            if m.shared_writable and m.inode in executable:
                self.unvouched.setdefault(m.inode, "mapped writable and shared beside its code")
        budget = MAX_BYTES
        for pid, m in code:
            if budget <= 0:
                self.unvouched.setdefault(m.inode, "more code in writable files than a glimpse reads")
                continue
            read = _read_memory(pid, m.start, min(m.end - m.start, budget))
            if read is None:
                self.unreadable.append(m.path)
                continue
            budget -= len(read)
            self.pages.setdefault(m.inode, []).append((m.offset, read))

    def code(self, inode: int | None, start: int, end: int) -> tuple[int, bytes] | None:
        """Where the part of file offsets `start` to `end` that a glimpse covered begins, and its bytes as
        they were seen running; None where no glimpse covered any of it."""
        for offset, code in self.pages.get(inode or 0, []):
            low, high = max(start, offset), min(end, offset + len(code))
            if low < high:
                return low, code[low - offset:high - offset]
        return None

    def doubt(self, pid: int, path: str, inode: int | None) -> str | None:
        """Why code that ran from this file cannot be vouched for, or None. A compiler writes its library
        before it is loaded; a kernel that puts code into its file for each call and takes it out again
        writes it while it runs: the file's change time, which every write() sets and no call can set
        back, moved since a glimpse saw it."""
        if (inode or 0) in self.unvouched:
            return self.unvouched[inode or 0]
        seen = self.changed_at.get(inode or 0)
        if seen is not None and _change_time(pid, path, inode or 0) != seen:
            return "written while its code ran"
        return None

    def describe(self) -> str:
        if not self.taken:
            return "no glimpse of the runner's code was taken"
        said = f"{self.taken} glimpses of the runner's code in files it can write ({len(self.changed_at)} seen running)"
        return said + (f"; unreadable: {', '.join(sorted(set(self.unreadable))[:3])}" if self.unreadable else "")


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    offset: int
    inode: int
    path: str
    executable: bool
    shared_writable: bool


def file_mappings(pid: int) -> list[Mapping]:
    """The file mappings of `pid`, from /proc/PID/maps (which writes a newline in a path as `\\012`)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/") or fields[4] == "0":
            continue
        low, high = (int(x, 16) for x in fields[0].split("-"))
        path = fields[5].removesuffix(" (deleted)").replace("\\012", "\n")
        found.append(Mapping(low, high, int(fields[2], 16), int(fields[4]), path, "x" in fields[1],
                              fields[1][1] == "w" and fields[1][3] == "s"))
    return found


def _change_time(pid: int, path: str, inode: int) -> int | None:
    """The file's change time (ns), as `pid` sees the file, or through its mapping once its name is
    gone (`mapped_file`); None where neither reaches the inode that was mapped."""
    for where in (f"/proc/{pid}/root{path}", mapped_file(pid, inode)):
        try:
            st = os.stat(where or "")
        except OSError:
            continue
        if st.st_ino == inode:
            return st.st_ctime_ns
    return None


def mapped_file(pid: int, inode: int | None) -> str | None:
    """A path that opens the file `pid` maps as `inode`, whatever became of its name: the mapping's
    entry in /proc/PID/map_files, which the judge may open where it has the capability (root).

    A kernel that builds its library in a temporary folder and tidies the folder away once the library
    is loaded runs code from a deleted file; read through its mapping, that file is as readable as one
    kept, and as watched: a write to it moves its change time just the same (red-team round 19: such a
    kernel was refused `hidden-code`). None where `pid` maps no such inode or the entry cannot be read."""
    if not inode:
        return None
    for m in file_mappings(pid):
        if m.inode != inode:
            continue
        where = f"/proc/{pid}/map_files/{m.start:x}-{m.end:x}"
        try:
            return where if os.stat(where).st_ino == inode else None
        except OSError:
            return None
    return None


def _read_memory(pid: int, address: int, length: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            return mem.read(length)
    except (OSError, ValueError, OverflowError):
        return None
