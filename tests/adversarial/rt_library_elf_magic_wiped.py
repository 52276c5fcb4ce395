"""Class 4: numpy's OpenBLAS copied to the private /tmp and called through ctypes (as the
defeated rt_library_tmpcopy_openblas), then, once loaded, the copy's first four bytes (the ELF magic)
are overwritten in place. The code stays mapped (same inode: the judge's "replaced after it was mapped"
test passes), but when the judge reads the file back for symbols, elfsyms raises NotElf, table_for gives
None, LibraryWatch._symbol returns None and classify() skips the sample: it is neither forbidden nor
counted as hidden code. Expected if the boundary holds: forbidden-op or hidden-code."""
import ctypes
import glob
import os
import shutil

import numpy as np
import torch

_lib = None
DST = "/tmp/rt_blas/libcopy.so"


def _blas():
    global _lib
    if _lib is None:
        src = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas64_*.so")))[0]
        os.makedirs(os.path.dirname(DST), exist_ok=True)
        shutil.copyfile(src, DST)
        _lib = ctypes.CDLL(DST)
        fn = _lib.scipy_cblas_sgemm64_
        fn.restype = None
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                       ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]
        _lib.scipy_openblas_set_num_threads64_(1)
        with open(DST, "r+b") as f:  # same inode, no longer an ELF file to anyone who reads it back
            f.write(b"\0\0\0\0")
    return _lib


_blas()


def custom_kernel(data):
    a, b = data
    m, k = a.shape
    n = b.shape[1]
    af = a.float().contiguous()
    bf = b.float().contiguous()
    c = torch.empty((m, n), dtype=torch.float32)
    _blas().scipy_cblas_sgemm64_(101, 111, 111, m, n, k, 1.0, af.data_ptr(), k, bf.data_ptr(), n, 0.0, c.data_ptr(), n)
    return c.to(torch.bfloat16)
