"""Reading `perf record`'s file directly: the samples' addresses and the code mapped at them.

`perf script` spends a second or more starting up and resolving every sample against every
library before it prints a line; the judge needs far less: which file (and where in it) each
sample of the runner's tree landed in. This reader walks the file's records once, keeps the
executable mappings of each process (with the moment each was made, so a mapping replaced
later does not rename earlier samples) and yields one `Hit` per sample. Symbols are looked up
afterwards, per file, by `sandbox/judge/elfsyms.py`.

perf files a mapping under the process that made it, but a child made by vfork shares its parent's
memory until it execs: what it maps, its parent runs (red-team round 20: a vfork child mapped
OpenBLAS over the pad of a judge-built library and exited; the runner's samples there read as the
pad). The records do not say how a child was made. The thread that vforked runs nothing until the
child execs or exits, so a child whose forking thread was never sampled meanwhile may share its
parent's memory; but so does a forked child its parent waits for, whose mappings are its own (red-team
round 21: such a child mapped the pad over OpenBLAS's address, and the runner's samples in OpenBLAS
read as the pad). A mapping that may have been made in shared memory is therefore filed under every
process that may share it as an alternative (`Hit.also`), never in place of the process's own: a
sample is read both ways, and either reading can make it forbidden or hidden.

Format: linux/tools/perf/Documentation/perf.data-file-format.txt and `perf_event.h`.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

_MAGIC = b"PERFILE2"
# Record types (perf_event.h) and the bits of `sample_type` that decide a sample's layout.
_MMAP, _LOST, _COMM, _EXIT, _FORK, _SAMPLE, _MMAP2 = 1, 2, 3, 4, 7, 9, 10
_IP, _TID, _TIME, _ID, _CPU, _STREAM_ID, _IDENTIFIER = 1 << 0, 1 << 1, 1 << 2, 1 << 6, 1 << 7, 1 << 9, 1 << 16
_COMM_EXEC = 1 << 13  # header.misc of a COMM record written by exec(): the old mappings are gone
_MMAP_BUILD_ID = 1 << 14  # header.misc of an MMAP2 record that carries a build id instead of device and inode
_SAMPLE_ID_ALL = 1 << 18  # bit of perf_event_attr's flags word


class PerfDataError(ValueError):
    """The file is not one this reader understands (not perf's format, or truncated)."""


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    pgoff: int
    path: str
    time: int
    inode: int | None  # as mapped (MMAP2 records): the file read back later must be this one


@dataclass(frozen=True)
class Hit:
    """One sample: the process, where the code it landed in comes from, and the offset in that file."""

    pid: int
    path: str  # "[unknown]" when no mapping covers the address
    file_offset: int
    inode: int | None = None
    address: int | None = None  # where the code lay in the process
    time: int = 0  # when it was taken (perf's clock: CLOCK_MONOTONIC as the judge starts it), ns
    also: Hit | None = None  # the same sample read with the mappings of processes that may share its memory


@dataclass
class _Process:
    maps: list[Mapping] = field(default_factory=list)
    shared: list[Mapping] = field(default_factory=list)  # made by a process that may share this one's memory


_NEVER = 1 << 64


@dataclass
class _Life:
    """A process from its fork until its exec or its last thread's exit, and whether it shares its parent's memory."""

    parent: int
    forker: int  # the parent's thread that forked it: a vfork holds that thread until the child execs or exits
    start: int
    released: int = _NEVER  # its exec or its first thread's exit: when a vfork lets the forker go
    exec_at: int = _NEVER
    last_exit: int = _NEVER
    threads: int = 1
    shares: bool = False

    def holds(self, time: int) -> bool:
        return self.start <= time <= min(self.exec_at, self.last_exit)

    def ended(self, kind: int, first_thread: bool, time: int) -> None:
        """An exec (new memory: the life ends), or one thread's exit (the last one ends it)."""
        if kind == _COMM or first_thread:
            self.released = min(self.released, time)
        if kind == _COMM:
            self.exec_at = time
            return
        self.threads -= 1
        if self.threads <= 0:
            self.last_exit = time


@dataclass(frozen=True)
class _Attr:
    sample_type: int
    sample_id_all: bool

    def trailer_time_offset(self, record_end: int) -> int | None:
        """Where the time sits in a non-sample record's trailing sample_id (absent: None)."""
        if not (self.sample_id_all and self.sample_type & _TIME):
            return None
        fields = [_TID, _TIME, _ID, _STREAM_ID, _CPU, _IDENTIFIER]
        size = 8 * sum(1 for f in fields if self.sample_type & f)
        return record_end - size + (8 if self.sample_type & _TID else 0)


def _read_attr(data: bytes) -> _Attr:
    magic, _size, attr_size, attrs_offset, attrs_size = struct.unpack_from("<8sQQQQ", data, 0)
    if magic != _MAGIC:
        raise PerfDataError("not a perf.data file (or one written by a perf too old for this reader)")
    if attrs_size < attr_size or attr_size < 48:
        raise PerfDataError("perf.data has no event attributes")
    # perf_event_attr: type u32, size u32, config u64, sample_period u64, sample_type u64, read_format u64, flags u64
    sample_type, _read_format, flags = struct.unpack_from("<QQQ", data, attrs_offset + 24)
    if not sample_type & _IP:
        raise PerfDataError("the samples carry no instruction pointer")
    return _Attr(sample_type, bool(flags & _SAMPLE_ID_ALL))


def _records(data: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(type, misc, start of the body, end of the record) for each record of the data section."""
    data_offset, data_size = struct.unpack_from("<QQ", data, 40)
    pos, end = data_offset, min(len(data), data_offset + data_size)
    while pos + 8 <= end:
        kind, misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8:
            raise PerfDataError(f"a record of size {size} at offset {pos}")
        yield kind, misc, pos + 8, min(pos + size, end)
        pos += size


def _cstring(data: bytes, start: int, end: int) -> str:
    stop = data.find(b"\0", start, end)
    return data[start:stop if stop >= 0 else end].decode(errors="replace")


class PerfData:
    """The samples and executable mappings of one perf.data file."""

    def __init__(self, path: Path) -> None:
        data = path.read_bytes()
        self.attr = _read_attr(data)
        self.processes: dict[int, _Process] = {}
        self.samples: list[tuple[int, int, int]] = []  # (pid, ip, time)
        self._seen: dict[int, list[int]] = {}  # thread -> the times it was sampled, in order
        # Records the kernel dropped because perf's buffers were full: mappings among them, perhaps (red-team
        # round 21 flooded the buffers with mappings of its own before mapping a library's code).
        self.lost = 0
        # Records come per CPU buffer, not in time order: a child's exec can be read after its new
        # mappings. Process changes are applied in time order, as perf itself sorts them.
        changes: list[tuple[int, int, int, int, int, int]] = []
        for kind, misc, body, end in _records(data):
            if kind == _SAMPLE:
                self._sample(data, body)
            elif kind == _LOST:
                self.lost += struct.unpack_from("<Q", data, body + 8)[0]
            elif kind in (_MMAP, _MMAP2, _FORK, _COMM, _EXIT):
                changes.append((self._time_of(data, end), len(changes), kind, misc, body, end))
        changes.sort()
        for times in self._seen.values():
            times.sort()
        self._lives = self._lives_of(data, changes)
        # The lives that may share their parent's memory, latest start first, opened as time passes (`_advance`).
        sharing = [(life.start, order, pid, life) for order, (pid, lives) in enumerate(self._lives.items())
                   for life in lives if life.shares]
        self._opening = sorted(sharing, key=lambda entry: (entry[0], entry[1]), reverse=True)
        self._open: dict[int, _Life] = {}
        for _time, _seq, kind, misc, body, end in changes:
            if kind in (_MMAP, _MMAP2):
                self._mmap(data, kind, misc, body, end)
            elif kind == _FORK:
                pid, ppid = struct.unpack_from("<II", data, body)
                if pid != ppid and ppid in self.processes:  # a new process starts with its parent's code
                    self.processes[pid] = _Process(list(self.processes[ppid].maps))
            elif kind == _COMM and misc & _COMM_EXEC:
                pid = struct.unpack_from("<I", data, body)[0]
                self.processes[pid] = _Process()

    def _lives_of(self, data: bytes, changes: list[tuple[int, int, int, int, int, int]]) -> dict[int, list[_Life]]:
        """Each child process's lives (a pid can be used again), and which of them shared their parent's memory."""
        lives: dict[int, list[_Life]] = {}
        for time, _seq, kind, misc, body, _end in changes:
            if kind == _FORK:
                pid, ppid, _tid, ptid = struct.unpack_from("<IIII", data, body)
                if pid != ppid:
                    lives.setdefault(pid, []).append(_Life(ppid, ptid, time))
                elif pid in lives:  # a new thread of a child
                    lives[pid][-1].threads += 1
            elif kind == _EXIT or (kind == _COMM and misc & _COMM_EXEC):
                pid, tid = struct.unpack_from("<II" if kind == _COMM else "<I4xI", data, body)  # EXIT: pid, ppid, tid
                life = lives[pid][-1] if pid in lives else None
                if life is not None and life.exec_at == _NEVER:
                    life.ended(kind, tid == pid, time)
        for pid_lives in lives.values():
            for life in pid_lives:
                seen = self._seen.get(life.forker, [])
                life.shares = bisect_right(seen, life.start) == bisect_right(seen, life.released)
        return lives

    def _time_of(self, data: bytes, end: int) -> int:
        """A non-sample record's time, from its trailing sample_id (0 where the file has none)."""
        at = self.attr.trailer_time_offset(end)
        return struct.unpack_from("<Q", data, at)[0] if at is not None and at + 8 <= end else 0

    def _sample(self, data: bytes, body: int) -> None:
        pos = body + (8 if self.attr.sample_type & _IDENTIFIER else 0)
        ip = struct.unpack_from("<Q", data, pos)[0]
        pos += 8
        pid, tid = struct.unpack_from("<II", data, pos) if self.attr.sample_type & _TID else (-1, -1)
        pos += 8 if self.attr.sample_type & _TID else 0
        time = struct.unpack_from("<Q", data, pos)[0] if self.attr.sample_type & _TIME else 0
        self.samples.append((pid, ip, time))
        self._seen.setdefault(tid, []).append(time)

    def _mmap(self, data: bytes, kind: int, misc: int, body: int, end: int) -> None:
        pid, _tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", data, body)
        name_at = body + 32 + (32 if kind == _MMAP2 else 0)  # MMAP2: device/inode or build id, prot, flags
        inode = None
        if kind == _MMAP2:
            prot = struct.unpack_from("<I", data, body + 56)[0]
            if not prot & 0x4:  # PROT_EXEC: data mappings hold no code
                return
            if not misc & _MMAP_BUILD_ID:
                inode = struct.unpack_from("<Q", data, body + 40)[0]
        time = self._time_of(data, end)
        mapping = Mapping(addr, addr + length, pgoff, _cstring(data, name_at, end), time, inode)
        self.processes.setdefault(pid, _Process()).maps.append(mapping)
        for sharer in self._sharers(pid, time):
            self.processes.setdefault(sharer, _Process()).shared.append(mapping)

    def _space(self, pid: int) -> int:
        """The eldest process whose memory `pid` may share now (itself, unless it may be a vfork child)."""
        for _ in range(len(self._open) + 1):  # a parent is always older: the walk ends
            life = self._open.get(pid)
            if life is None:
                return pid
            pid = life.parent
        return pid

    def _sharers(self, pid: int, time: int) -> set[int]:
        """The other processes whose memory a mapping made by `pid` at `time` may land in. Changes are applied
        in time order, so the lives that may share a memory at `time` are kept as the time passes (a walk of
        every life for every mapping took 24 s for 3,000 children and 20,000 mappings)."""
        self._advance(time)
        if not self._open:
            return set()
        space = self._space(pid)
        return {other for other in [space, *self._open] if self._space(other) == space} - {pid}

    def _advance(self, time: int) -> None:
        """Open the sharing lives begun by `time`, close those over before it."""
        while self._opening and self._opening[-1][0] <= time:
            _start, _order, pid, life = self._opening.pop()
            self._open[pid] = life
        for pid in [pid for pid, life in self._open.items() if not life.holds(time)]:
            del self._open[pid]

    def hits(self) -> Iterator[Hit]:
        """Each sample's file and offset, resolved against the mappings its process had at that moment,
        and (`Hit.also`) against those and the mappings of processes that may have shared its memory,
        where that reads differently."""
        own = {pid: _MapIndex(p.maps) for pid, p in self.processes.items()}
        shared = {pid: _MapIndex(p.maps + p.shared) for pid, p in self.processes.items() if p.shared}
        for pid, ip, time in self.samples:
            found = own[pid].find(ip, time) if pid in own else None
            hit = _hit(pid, ip, time, found)
            other = shared[pid].find(ip, time) if pid in shared else None
            yield hit if other is None or other == found else replace(hit, also=_hit(pid, ip, time, other))


def _hit(pid: int, ip: int, time: int, found: Mapping | None) -> Hit:
    if found is None:
        return Hit(pid, "[unknown]", ip, time=time)
    return Hit(pid, found.path, ip - found.start + found.pgoff, found.inode, ip, time)


class _MapIndex:
    """Mappings sorted by start address; the latest one made before the sample wins an overlap."""

    def __init__(self, maps: list[Mapping]) -> None:
        self.maps = sorted(maps, key=lambda m: m.start)
        self.starts = [m.start for m in self.maps]
        # Without overlaps (the usual case) the mapping just below an address is the only candidate.
        self.disjoint = all(a.end <= b.start for a, b in zip(self.maps, self.maps[1:], strict=False))

    def find(self, ip: int, time: int) -> Mapping | None:
        below = bisect_right(self.starts, ip)
        if self.disjoint:
            return self.maps[below - 1] if below and ip < self.maps[below - 1].end else None
        candidates = [m for m in self.maps[:below] if m.start <= ip < m.end]
        if not candidates:
            return None
        before = [m for m in candidates if m.time <= time]
        return max(before, key=lambda m: m.time) if before else min(candidates, key=lambda m: m.time)
