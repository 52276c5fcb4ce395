"""Trick (class 5, library): numpy's OpenBLAS copied to /tmp with every forbidden name rewritten.

Names in a file the runner wrote prove nothing. This kernel copies numpy's bundled OpenBLAS into its
private /tmp and rewrites, in place and at the same length, every name a forbidden pattern could
match: `gemm` becomes `gxmm`, `cblas_` becomes `cblaz_`, `matmul` becomes `matmux`. The symbol table
is rewritten before the copy is loaded; the dynamic string table after it (the loader has resolved
what it needed by then). No name is blank, so no sample falls in unnamed code, and no name matches
the problem's patterns. The library's kernels run under names like `sgxmm_kernel_SKYLAKEX`.

Stopped by recognising the library's code by its bytes (`sandbox/judge/libcode.py`): the copy's
machine code is the installed library's, whatever its tables say (red-team round 18).
"""
import ctypes
import glob
import os
import re
import shutil
import struct

import numpy as np
import torch

FOLDER = "/tmp/rt_renamed_blas"
COPY = FOLDER + "/libnotblas.so"
_lib = None


def _string_tables(path, kind):
    """(offset, size) of the string tables linked from the sections of this type (2 .symtab, 11 .dynsym)."""
    with open(path, "rb") as f:
        head = f.read(64)
        shoff, = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
        f.seek(shoff)
        raw = f.read(shentsize * shnum)
    sections = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]
    return [(sections[s[6]][4], sections[s[6]][5]) for s in sections if s[1] == kind]


def _rename(path, kind):
    for offset, size in _string_tables(path, kind):
        with open(path, "r+b") as f:
            f.seek(offset)
            names = f.read(size)
            names = re.sub(rb"(?i)gemm", lambda m: m.group(0)[:1] + b"xmm", names)
            names = re.sub(rb"(?i)matmul", b"matmux", names.replace(b"cblas_", b"cblaz_"))
            f.seek(offset)
            f.write(names)


def _blas():
    global _lib
    if _lib is None:
        found = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas64_*.so"))
        os.makedirs(FOLDER, exist_ok=True)
        shutil.copyfile(sorted(found)[0], COPY)
        _rename(COPY, 2)
        _lib = ctypes.CDLL(COPY, mode=os.RTLD_NOW)
        sgemm = _lib.scipy_cblas_sgemm64_
        sgemm.restype = None
        sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
        _lib.sgemm = sgemm
        _rename(COPY, 11)
    return _lib


_blas()


def custom_kernel(data):
    a, b = data
    m, k = a.shape
    n = b.shape[1]
    a32, b32 = a.float().contiguous(), b.float().contiguous()
    c = torch.empty((m, n), dtype=torch.float32)
    _blas().sgemm(101, 111, 111, m, n, k, 1.0, a32.data_ptr(), k, b32.data_ptr(), n, 0.0, c.data_ptr(), n)
    return c.to(torch.bfloat16)
