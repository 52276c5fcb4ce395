"""Trick (class 2, against the judge reading sparse outputs run by run): one row of a pitched output lies in a
page the kernel has made unreadable.

The judge reads an output far sparser than its span where its elements lie, up to 1,024 runs in one
process_vm_readv (sandbox/judge/remote.py's `Runs`). This kernel writes a correct softmax into a fresh
mapping whose rows are 32 pages apart, returns the (rows, cols) slice of it, and then takes every access away
from the last row's pages. One system call then reads the rows before the hole and stops short: the rest must be
the runner's error, never the harness's, and never a partial output compared as if whole. Expected: `rejected`,
rule `protocol`.
"""
import ctypes
import mmap

import numpy as np
import torch
from task import input_t, output_t

PAGES_APART = 32
KEPT = 128  # mappings of earlier calls kept until the judge has read them (a batch is shorter than this)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_mapped: list[tuple[int, int]] = []


def custom_kernel(data: input_t) -> output_t:
    (x,) = data
    rows, cols = x.shape
    row_pages = (cols * 4 + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    pitch = row_pages * PAGES_APART * mmap.PAGESIZE
    size = rows * pitch
    at = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    _mapped.append((at, size))
    while len(_mapped) > KEPT:
        _libc.munmap(*_mapped.pop(0))
    floats = np.ctypeslib.as_array(ctypes.cast(at, ctypes.POINTER(ctypes.c_float)), shape=(size // 4,))
    out = np.lib.stride_tricks.as_strided(floats, shape=(rows, cols), strides=(pitch, 4))
    values = x.numpy()
    shifted = np.exp(values - values.max(axis=-1, keepdims=True))
    np.divide(shifted, shifted.sum(axis=-1, keepdims=True), out=out)
    if rows > 1:
        _libc.mprotect(at + (rows - 1) * pitch, row_pages * mmap.PAGESIZE, 0)  # PROT_NONE
    return torch.from_numpy(out)
