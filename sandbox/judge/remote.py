"""The runner's memory, read by the judge: where a CPU kernel's outputs are taken from.

A CPU runner answers each call with where its output lies in its own memory (a spec whose `address`
is the runner's), and the judge copies the bytes out while the runner's sandbox is stopped. Nothing
places the output anywhere inside the round trip, so no figure holds a copy that a kernel could skip
by writing where the copy would have gone: red-team round 23 wrote its rows straight into the arena,
and round 26 replaced the copy the runner then charged such a kernel (1.3-1.9 times "faster" than its
twin, paired). The judge reads with `process_vm_readv`, else through the runner's `/proc/PID/mem`,
opened at setup, before any candidate code existed: a kernel that later makes itself undumpable
cannot take back what was opened. Where neither works, the runner places outputs in the arena, as
before, and the verdict's protections say so (`Outputs.note`).
"""

from __future__ import annotations

import ctypes
import errno
import math
import os
import secrets
from dataclasses import dataclass
from typing import Any

import torch

from sandbox.shared.arena import ArenaError, SpecLayout, parse_spec, storage_bytes

# Bytes an output may hold, beyond the reference's output: the same elements in another dtype read as a wrong
# output, not as a protocol error. And bytes its layout may span, which the judge reads piece by piece (at most
# `PIECE` at a time): a legitimate output may be one slot of a ring interleaved along its last axis (24 slots:
# tests/adversarial/legit_rt_ring_interleaved.py), and a larger span is no output of this call.
SPAN_FACTOR = 4
SPAN_SLACK = 1 << 20
READ_FACTOR = 64
READ_SLACK = 64 << 20
PIECE = 16 << 20
# What each read is charged at least: a layout cut into many tiny pieces would otherwise cost the judge a system call
# per byte within the budget (2^27 one-byte reads for a view of 27 dimensions of two elements, strides past a piece).
LEAF_CHARGE = 64 << 10
# Runs one read of a sparse view gathers at most (the kernel's own limit on a vector of ranges), and the addresses
# past any a process can map (57 bits: five-level page tables), which also keeps every offset within 64 bits.
IOV_MAX = 1024
ADDRESS_LIMIT = 1 << 57
# What each run of a sparse view is charged at least: the kernel pins a page per range, so a run of a few bytes costs
# about what copying a page does (0.75 µs a range on the 2-core VM: 1M runs of 4 bytes took 752 ms, the dense read
# of their 256 MB span about 25 ms); such a view is read whole.
RUN_CHARGE = 4096
TOKEN_BYTES = 32


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


def _vm_readv() -> Any:
    """The C library's process_vm_readv, typed, or None where it has none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.process_vm_readv
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                     ctypes.c_ulong]
    call.restype = ctypes.c_ssize_t
    return call


_VM_READV = _vm_readv()


def _iovecs(pairs: torch.Tensor) -> Any:
    """A C vector of ranges over an (n, 2) int64 tensor of addresses and lengths, which must outlive its use."""
    return ctypes.cast(pairs.data_ptr(), ctypes.POINTER(_IoVec))


class RunnerMemory:
    """One runner process's memory, readable by the judge (`probe` says whether it is)."""

    def __init__(self, pid: int, fd: int | None, vm_readv: bool) -> None:
        self.pid = pid
        self._fd = fd
        self._vm_readv = vm_readv

    @classmethod
    def probe(cls, pid: int, address: Any, token: bytes) -> tuple[RunnerMemory | None, str]:
        """The reader, if `token` reads back at `address` (where the runner said it keeps it); else why not."""
        fd = None
        try:
            fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            why = f"/proc/{pid}/mem: {exc.strerror}"
        else:
            why = ""
        if not isinstance(address, int) or isinstance(address, bool) or not 0 < address < 1 << 64:
            return cls._closed(fd), f"the runner gave no place for the probe ({str(address)[:50]})"
        for vm_readv in (True, False):
            reader = cls(pid, fd, vm_readv)
            if vm_readv and _VM_READV is None or not vm_readv and fd is None:
                continue
            buffer = torch.zeros(len(token), dtype=torch.uint8)
            try:
                reader.read_into(address, buffer)
            except OSError as exc:
                why = f"{why}; " if why else ""
                why += f"{'process_vm_readv' if vm_readv else 'reading /proc/PID/mem'}: {exc.strerror}"
                continue
            if bytes(buffer.tolist()) == token:
                if vm_readv:
                    cls._closed(fd)
                    reader._fd = None
                return reader, ""
            why = "the probe read back other bytes than the runner was given"
        return cls._closed(fd), why

    @staticmethod
    def _closed(fd: int | None) -> None:
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        self._fd = self._closed(self._fd)

    def read_into(self, address: int, buffer: torch.Tensor) -> None:
        """Fill `buffer` (contiguous bytes on the CPU) from the runner's memory at `address`; OSError when
        any byte of the range is not readable there."""
        view = buffer.view(torch.uint8).reshape(-1)
        done, total = 0, view.numel()
        while done < total:
            if self._vm_readv:
                local = _IoVec(view.data_ptr() + done, total - done)
                remote = _IoVec(address + done, total - done)
                got = _VM_READV(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
                if got < 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code))
            else:
                assert self._fd is not None
                got = os.preadv(self._fd, [view[done:].numpy()], address + done)  # type: ignore[list-item]
            if got <= 0:
                raise OSError(errno.EFAULT, "the range ends in memory the runner has not mapped")
            done += got

    def tensor(self, spec: dict[str, Any], budget: ReadBudget) -> torch.Tensor:
        """The output a spec describes in the runner's memory, copied into the judge's: a dense tensor of
        the spec's shape and values. ArenaError for a spec no output of this call could have (elements, or
        bytes to read, past what is left of the call's `budget`) or a range the runner has not mapped.

        A view far sparser than its span (rows at a wide pitch, a slot of a ring) is read run by run, many
        runs to a system call; any other is read whole, a piece at a time."""
        layout = parse_spec(spec, "address")
        budget.hold(layout.nbytes, layout.shape)
        out = torch.empty(layout.shape, dtype=layout.dtype)
        if layout.span == 0:
            return out
        if layout.start + layout.span > ADDRESS_LIMIT:
            raise ArenaError(f"the output at {layout.start:#x} ({layout.span} bytes) ends past any address a process "
                             "can map")
        runs = Runs.of(layout) if self._vm_readv else None
        try:
            if runs is not None and (cost := runs.cost()) < max(layout.span, LEAF_CHARGE):
                budget.fits(cost)
                self._read_runs(runs, out, budget)
            else:
                budget.fits(layout.span)  # every byte of the span is read at least once
                self._gather(layout.start, layout.shape, layout.stride, out, budget)
        except OSError as exc:
            raise ArenaError(f"the output at {layout.start:#x} ({layout.span} bytes) cannot be read from the runner's "
                             f"memory: {exc.strerror}") from exc
        return out

    def _read_runs(self, runs: Runs, out: torch.Tensor, budget: ReadBudget) -> None:
        """Copy the view `runs` describes into `out`, up to `Runs.per_call` runs a system call, each call
        charged to `budget` (`Runs.charge`)."""
        dense = torch.empty(runs.shape_read, dtype=out.dtype)
        for first in range(0, runs.count, runs.per_call):
            count = min(runs.per_call, runs.count - first)
            budget.read(runs.charge(count))
            local = dense.data_ptr() + torch.arange(first, first + count, dtype=torch.int64) * runs.run_bytes
            self._read_vectors(local, runs.start + runs.offsets(first, count), runs.run_bytes)
        out.permute(runs.order).copy_(dense)

    def _read_vectors(self, local: torch.Tensor, remote: torch.Tensor, length: int) -> None:
        """Read `length` bytes at each address of `remote` into the one beside it in `local`, in one system
        call; where that falls short (a range not mapped), run by run, so the error says why."""
        size = torch.full_like(local, length)
        into, at = torch.stack([local, size], dim=1), torch.stack([remote, size], dim=1)
        got = _VM_READV(self.pid, _iovecs(into), len(local), _iovecs(at), len(remote), 0)
        if got == length * len(local):
            return
        for address, target in zip(remote.tolist(), local.tolist(), strict=True):
            self.read_into(address, torch.frombuffer((ctypes.c_uint8 * length).from_address(target), dtype=torch.uint8))

    def _gather(self, start: int, shape: list[int], stride: list[int], out: torch.Tensor, budget: ReadBudget) -> None:
        """Copy the strided view at `start` into `out` (dense, of `shape`), reading at most `PIECE` bytes at
        a time: a span larger than that is cut along its widest-strided dimension. Every byte read is
        charged to `budget`: cut along one dimension, the pieces of a view whose other strides overlap
        each span most of the whole, and a red-team spec within both single limits made the judge read
        32 TiB that way."""
        itemsize = out.element_size()
        span = storage_bytes(shape, stride, itemsize)
        wide = [d for d in range(len(shape)) if shape[d] > 1 and stride[d] > 0]
        if span <= PIECE or not wide:
            budget.read(max(span, LEAF_CHARGE))
            raw = torch.empty(span, dtype=torch.uint8)
            self.read_into(start, raw)
            out.copy_(raw.view(out.dtype).as_strided(shape, stride))
            return
        d = max(wide, key=lambda k: stride[k])
        step = max(1, min(shape[d] // 2, PIECE // (stride[d] * itemsize)))  # always a cut: the recursion ends
        for first in range(0, shape[d], step):
            count = min(step, shape[d] - first)
            part = [count if k == d else n for k, n in enumerate(shape)]
            self._gather(start + first * stride[d] * itemsize, part, stride, out.narrow(d, first, count), budget)


@dataclass(frozen=True)
class Runs:
    """A strided view as runs of contiguous bytes: its innermost dimensions whose strides nest densely make
    one run, the others (widest stride first) say where each run starts. A zero-stride dimension is read
    once and broadcast."""

    start: int
    order: list[int]  # the view's dimensions as read: the outer ones, widest first, then the run's, then the rest
    shape_read: list[int]  # extents in that order, 1 for a broadcast dimension
    outer: list[tuple[int, int]]  # (extent, stride in bytes) of each outer dimension, widest first
    run_bytes: int

    @classmethod
    def of(cls, layout: SpecLayout) -> Runs:
        shape, stride = layout.shape, layout.stride
        moving = sorted((d for d in range(len(shape)) if shape[d] > 1 and stride[d] > 0), key=lambda d: -stride[d])
        inner: list[int] = []
        run = 1
        while moving and stride[moving[-1]] == run:
            inner.insert(0, moving[-1])
            run *= shape[moving.pop()]
        rest = [d for d in range(len(shape)) if d not in moving and d not in inner]
        order = moving + inner + rest
        return cls(layout.start, order, [shape[d] if stride[d] > 0 else 1 for d in order],
                   [(shape[d], stride[d] * layout.itemsize) for d in moving], run * layout.itemsize)

    @property
    def count(self) -> int:
        return math.prod(extent for extent, _ in self.outer)

    @property
    def per_call(self) -> int:
        return min(IOV_MAX, max(1, PIECE // self.run_bytes))

    def charge(self, runs: int) -> int:
        """What one system call reading this many runs charges a budget (`RUN_CHARGE` a run, `LEAF_CHARGE` a call
        at least)."""
        return max(runs * max(self.run_bytes, RUN_CHARGE), LEAF_CHARGE)

    def cost(self) -> int:
        """What reading every run charges a budget."""
        full, rest = divmod(self.count, self.per_call)
        return full * self.charge(self.per_call) + (self.charge(rest) if rest else 0)

    def offsets(self, first: int, count: int) -> torch.Tensor:
        """Where runs `first` to `first + count` start, in bytes from the view's first element."""
        index = torch.arange(first, first + count, dtype=torch.int64)
        offset = torch.zeros(count, dtype=torch.int64)
        for extent, step in reversed(self.outer):
            offset += index % extent * step
            index //= extent
        return offset


class ReadBudget:
    """What the judge may copy out of the runner for one call's output, all its tensors together: the
    elements it holds (`SPAN_FACTOR` times the expected output's bytes) and the bytes read to get them
    (`READ_FACTOR` times). Per tensor alone, a red-team output of 70,000 references to one 9 MB tensor
    passed each limit and filled the judge's memory with copies (16 GB, then the host's OOM killer)."""

    def __init__(self, expected_bytes: int) -> None:
        self.expected = expected_bytes
        self.held_left = SPAN_FACTOR * expected_bytes + SPAN_SLACK
        self.read_left = READ_FACTOR * expected_bytes + READ_SLACK

    def hold(self, nbytes: int, shape: list[int]) -> None:
        if nbytes > self.held_left:
            raise ArenaError(f"an output of shape {shape} holds {nbytes} bytes, more than the {self.held_left} left of "
                             f"{SPAN_FACTOR} times the expected output's {self.expected} bytes")
        self.held_left -= nbytes

    def fits(self, nbytes: int) -> None:
        if nbytes > self.read_left:
            raise ArenaError(f"an output takes {nbytes} bytes to read from the runner's memory, more than the "
                             f"{self.read_left} left of {READ_FACTOR} times the expected output's {self.expected} "
                             "bytes")

    def read(self, nbytes: int) -> None:
        if nbytes > self.read_left:
            raise ArenaError(f"reading the output would take {nbytes} bytes more of the runner's memory, past the "
                             f"{READ_FACTOR} times the expected output's {self.expected} bytes a call's output may "
                             "span")
        self.read_left -= nbytes


def new_token() -> bytes:
    """Bytes the runner keeps for the probe, never the same twice."""
    return secrets.token_bytes(TOKEN_BYTES)
