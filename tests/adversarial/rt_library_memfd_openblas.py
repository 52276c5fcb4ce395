"""Trick (class 5, library): numpy's OpenBLAS loaded from a memfd, called through ctypes.

The library's bytes are copied into an anonymous memfd and dlopen'ed from
/proc/self/fd/N, so the mapping is named "/memfd:... (deleted)": a shared object perf may
not be able to open to resolve symbols (samples then read [unknown]). Then cblas_sgemm.
"""
import ctypes
import glob
import os

import numpy as np
import torch

_lib = None


def _blas():
    global _lib
    if _lib is None:
        src = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas64_*.so")))[0]
        fd = os.memfd_create("kernel-helpers", 0)
        with open(src, "rb") as f:
            os.write(fd, f.read())
        _lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
        fn = _lib.scipy_cblas_sgemm64_
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                       ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
        _lib.scipy_openblas_set_num_threads64_(1)  # its own pool fights torch's OpenMP threads on few cores
    return _lib


def custom_kernel(data):
    a, b = data
    m, k = a.shape
    n = b.shape[1]
    af = a.float().contiguous()
    bf = b.float().contiguous()
    c = torch.empty((m, n), dtype=torch.float32)
    _blas().scipy_cblas_sgemm64_(101, 111, 111, m, n, k, 1.0, af.data_ptr(), k, bf.data_ptr(), n, 0.0, c.data_ptr(), n)
    return c.to(torch.bfloat16)
