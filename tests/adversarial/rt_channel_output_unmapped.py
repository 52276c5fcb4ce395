"""Trick (class 2, against the judge reading outputs from the runner's memory): the output's pages are unmapped
as the call returns.

The runner answers with where the output lies (`_located`: an address, no bytes), and the judge copies it from
the runner's memory after the answer (sandbox/judge/remote.py). This kernel computes a correct softmax into
anonymous memory of its own and unmaps it before returning: the address in the answer then names nothing. A
read that fails there must be the runner's fault, never the harness's. Expected: `rejected`, rule `protocol`.
"""
import ctypes
import mmap

import numpy as np
import torch
from task import input_t, output_t

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def custom_kernel(data: input_t) -> output_t:
    (x,) = data
    size = (x.numel() * 4 + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
    address = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    view = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_float)), shape=(x.numel(),))
    values = x.numpy()
    shifted = np.exp(values - values.max(axis=-1, keepdims=True))
    np.divide(shifted, shifted.sum(axis=-1, keepdims=True), out=view.reshape(values.shape))
    _libc.munmap(address, size)
    return torch.from_numpy(view).view(x.shape)
