"""perf.data reading: whose mappings a sample is read against (files written here, record by record)."""

from __future__ import annotations

import struct
from pathlib import Path

from sandbox.judge.perfdata import PerfData

_IP, _TID, _TIME = 1 << 0, 1 << 1, 1 << 2
_SAMPLE_ID_ALL = 1 << 18
_MMAP2, _LOST, _COMM, _EXIT, _FORK, _SAMPLE = 10, 2, 3, 4, 7, 9
_COMM_EXEC = 1 << 13
PARENT, CHILD = 100, 101


class _Recorder:
    """Writes the records perf would (IP, TID and TIME in samples; every other record ends with pid, tid, time)."""

    def __init__(self) -> None:
        self.records: list[bytes] = []

    def _add(self, kind: int, body: bytes, pid: int, tid: int, time: int, misc: int = 0) -> None:
        body += struct.pack("<IIQ", pid, tid, time)
        self.records.append(struct.pack("<IHH", kind, misc, 8 + len(body)) + body)

    def mmap(self, pid: int, start: int, path: str, time: int, inode: int = 7) -> None:
        name = path.encode() + b"\0"
        name += bytes(-len(name) % 8)
        body = struct.pack("<IIQQQIIQQII", pid, pid, start, 0x10000, 0, 8, 1, inode, 0, 0x5, 0x2) + name
        self._add(_MMAP2, body, pid, pid, time)

    def fork(self, pid: int, ppid: int, time: int, kind: int = _FORK) -> None:
        self._add(kind, struct.pack("<IIIIQ", pid, ppid, pid, ppid, time), pid, pid, time)

    def exec(self, pid: int, time: int) -> None:
        self._add(_COMM, struct.pack("<II", pid, pid) + b"prog\0\0\0\0", pid, pid, time, misc=_COMM_EXEC)

    def lost(self, count: int, time: int) -> None:
        self._add(_LOST, struct.pack("<QQ", 7, count), 0, 0, time)

    def sample(self, pid: int, ip: int, time: int, tid: int | None = None) -> None:
        body = struct.pack("<QIIQ", ip, pid, pid if tid is None else tid, time)
        self.records.append(struct.pack("<IHH", _SAMPLE, 0, 8 + len(body)) + body)

    def write(self, path: Path) -> Path:
        attr = struct.pack("<IIQQQQQ", 1, 120, 0, 997, _IP | _TID | _TIME, 0, _SAMPLE_ID_ALL).ljust(120, b"\0")
        attrs_at = 104
        ids = struct.pack("<QQ", 0, 0)  # the attribute's id section: none
        data = b"".join(self.records)
        data_at = attrs_at + len(attr) + len(ids)
        header = struct.pack("<8sQQQQQQQQ", b"PERFILE2", 104, len(attr) + len(ids), attrs_at, len(attr) + len(ids),
                             data_at, len(data), 0, 0).ljust(104, b"\0")
        path.write_bytes(header + attr + ids + data)
        return path


def _where(recorder: _Recorder, tmp_path: Path) -> list[str]:
    """Each sample's file, and after ` | ` the file it reads as with the mappings of processes that may share
    its memory, where that differs."""
    hits = PerfData(recorder.write(tmp_path / "perf.data")).hits()
    return [hit.path + (f" | {hit.also.path}" if hit.also else "") for hit in hits]


def _parent_with_a_child(recorder: _Recorder) -> None:
    recorder.mmap(PARENT, 0x400000, "/build/lib.so", time=10)
    recorder.fork(CHILD, PARENT, time=20)


def test_a_sample_is_read_against_its_own_process_mappings(tmp_path: Path) -> None:
    recorder = _Recorder()
    recorder.mmap(PARENT, 0x400000, "/build/lib.so", time=10)
    recorder.sample(PARENT, 0x400100, time=20)
    recorder.sample(PARENT, 0x900000, time=21)
    assert _where(recorder, tmp_path) == ["/build/lib.so", "[unknown]"]


def test_a_mapping_made_by_a_child_while_its_parent_was_suspended_is_the_parents_too(tmp_path: Path) -> None:
    # vfork: the child shares its parent's memory, and the thread that forked runs no code until the child exits.
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.mmap(CHILD, 0x400000, "/usr/lib/libopenblas.so", time=30)
    recorder.fork(CHILD, PARENT, time=40, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/build/lib.so | /usr/lib/libopenblas.so"]


def test_a_forked_childs_mapping_never_replaces_its_waiting_parents_own(tmp_path: Path) -> None:
    # Red-team round 21: a forked child (its own memory) whose parent waited for it mapped a pad over the
    # address of the parent's OpenBLAS; read in its place, the parent's samples in OpenBLAS named the pad.
    recorder = _Recorder()
    recorder.mmap(PARENT, 0x400000, "/usr/lib/libopenblas.so", time=10)
    recorder.fork(CHILD, PARENT, time=20)
    recorder.mmap(CHILD, 0x400000, "/build/lib.so", time=30)
    recorder.fork(CHILD, PARENT, time=40, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/usr/lib/libopenblas.so | /build/lib.so"]


def test_the_child_of_a_suspended_parent_that_forks_again_maps_for_both(tmp_path: Path) -> None:
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.fork(CHILD + 1, CHILD, time=25)
    recorder.mmap(CHILD + 1, 0x400000, "/usr/lib/libopenblas.so", time=30)
    recorder.fork(CHILD + 1, CHILD, time=35, kind=_EXIT)
    recorder.fork(CHILD, PARENT, time=40, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/build/lib.so | /usr/lib/libopenblas.so"]


def test_a_child_whose_parent_ran_meanwhile_maps_only_for_itself(tmp_path: Path) -> None:
    # fork: the parent's thread was seen running while the child lived, so their memories are apart.
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.sample(PARENT, 0x400100, time=25)
    recorder.mmap(CHILD, 0x400000, "/usr/lib/other.so", time=30)
    recorder.fork(CHILD, PARENT, time=40, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=50)
    recorder.sample(CHILD, 0x400100, time=51)
    assert _where(recorder, tmp_path) == ["/build/lib.so", "/build/lib.so", "/usr/lib/other.so"]


def test_another_thread_of_the_parent_running_does_not_make_a_child_apart(tmp_path: Path) -> None:
    # vfork suspends only the thread that called it; the parent's other threads share the child's memory too.
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.sample(PARENT, 0x400100, time=25, tid=PARENT + 50)
    recorder.mmap(CHILD, 0x400000, "/usr/lib/libopenblas.so", time=30)
    recorder.fork(CHILD, PARENT, time=40, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/build/lib.so", "/build/lib.so | /usr/lib/libopenblas.so"]


def test_mappings_a_child_makes_after_its_exec_are_its_own(tmp_path: Path) -> None:
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.exec(CHILD, time=25)
    recorder.mmap(CHILD, 0x400000, "/usr/bin/cc1plus", time=30)
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/build/lib.so"]


def test_a_pid_used_again_after_its_process_exited_does_not_share_with_the_old_parent(tmp_path: Path) -> None:
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.fork(CHILD, PARENT, time=22, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=23)
    recorder.mmap(CHILD, 0x400000, "/usr/lib/libopenblas.so", time=30)  # no fork record: a process of unknown origin
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/build/lib.so", "/build/lib.so"]


def test_a_thread_a_vfork_child_leaves_behind_still_maps_into_the_parent(tmp_path: Path) -> None:
    # The child's first thread exits (the parent goes on); a second thread of the child lives in the same memory.
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.fork(CHILD, CHILD, time=25)  # a thread of the child: same process
    recorder.fork(CHILD, PARENT, time=30, kind=_EXIT)
    recorder.sample(PARENT, 0x400100, time=35)
    recorder.mmap(CHILD, 0x400000, "/usr/lib/libopenblas.so", time=40)
    recorder.sample(PARENT, 0x400100, time=50)
    assert _where(recorder, tmp_path) == ["/build/lib.so", "/build/lib.so | /usr/lib/libopenblas.so"]


def test_what_a_parent_maps_while_its_vfork_child_runs_is_the_childs_too(tmp_path: Path) -> None:
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.mmap(PARENT, 0x400000, "/usr/lib/libopenblas.so", time=30)  # by another thread of the parent
    recorder.sample(CHILD, 0x400100, time=35)
    recorder.fork(CHILD, PARENT, time=40, kind=_EXIT)
    assert _where(recorder, tmp_path) == ["/build/lib.so | /usr/lib/libopenblas.so"]


def test_records_the_kernel_dropped_are_counted(tmp_path: Path) -> None:
    # Red-team round 21 flooded perf's buffers with mappings of its own before mapping a library's code:
    # a mapping lost that way leaves the samples read against the one before it.
    recorder = _Recorder()
    _parent_with_a_child(recorder)
    recorder.lost(120, time=30)
    recorder.lost(5, time=31)
    recorder.sample(PARENT, 0x400100, time=50)
    data = PerfData(recorder.write(tmp_path / "perf.data"))
    assert data.lost == 125 and [hit.path for hit in data.hits()] == ["/build/lib.so"]
