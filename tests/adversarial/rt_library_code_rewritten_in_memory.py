"""Trick (class 5, library): code rewritten in memory after it was loaded, so no file shows what ran.

Library code is recognised by its bytes, read from the file each sample's code was mapped from. This
kernel builds a small C++ library holding a correct blocked matmul (`real_mm`) and a placeholder of
the same signature padded with 8 KB of `nop`s (`slot_mm`). At import it makes the placeholder's pages
writable, copies the matmul's machine code over it, makes them executable again and calls the
placeholder: every sample lands in `slot_mm`, whose bytes in the file are `nop`s. A real cheat would
copy a library's kernel there instead, and the file would show none of it.

It writes the placeholder through /proc/self/mem, which ignores page protections, and where that is
refused, through `mprotect`. Stopped by the runner's sandbox: a CPU runner may not make memory executable after it was
written (`mprotect` with PROT_EXEC, `mmap` writable and executable at once: its system-call filter), and
its /proc is read-only, so the import fails.
"""
import ctypes
import mmap

import torch
from sandbox.native import load_cpp

SOURCE = r"""
#pragma GCC optimize("O1")
extern "C" void real_mm(const float* a, const float* b, float* c, long m, long n, long k) {
  for (long i = 0; i < m; ++i) {
    for (long j = 0; j < n; ++j) c[i * n + j] = 0.0f;
    for (long p = 0; p < k; ++p) {
      float x = a[i * k + p];
      for (long j = 0; j < n; ++j) c[i * n + j] += x * b[p * n + j];
    }
  }
}
extern "C" void real_mm_end(void) {}
extern "C" void slot_mm(const float* a, const float* b, float* c, long m, long n, long k) {
  asm volatile(".fill 8192, 1, 0x90");
}
"""
_lib = load_cpp(SOURCE, name="rt_rewritten_in_memory", openmp=False)
_raw = ctypes.CDLL(str(_lib.path))
_libc = ctypes.CDLL(None, use_errno=True)


def _address(name):
    return ctypes.cast(getattr(_raw, name), ctypes.c_void_p).value


def _rewrite():
    source, end, slot = _address("real_mm"), _address("real_mm_end"), _address("slot_mm")
    size = end - source
    first = slot & ~(mmap.PAGESIZE - 1)
    length = (slot + size - first + mmap.PAGESIZE - 1) & ~(mmap.PAGESIZE - 1)
    try:  # /proc/self/mem writes a page whatever its protection
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(slot)
            mem.write(ctypes.string_at(source, size))
    except OSError:
        if _libc.mprotect(ctypes.c_void_p(first), ctypes.c_size_t(length), 1 | 2) != 0:
            raise OSError(ctypes.get_errno(), "mprotect refused: the placeholder cannot be written") from None
        ctypes.memmove(slot, source, size)
        if _libc.mprotect(ctypes.c_void_p(first), ctypes.c_size_t(length), 1 | 4) != 0:
            raise OSError(ctypes.get_errno(), "mprotect refused: the rewritten placeholder cannot run") from None
    function = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
                                ctypes.c_long, ctypes.c_long)(slot)
    return function


_slot = _rewrite()


def custom_kernel(data):
    a, b = data
    m, k = a.shape
    n = b.shape[1]
    a32, b32 = a.float().contiguous(), b.float().contiguous()
    c = torch.empty((m, n), dtype=torch.float32)
    _slot(a32.data_ptr(), b32.data_ptr(), c.data_ptr(), m, n, k)
    return c.to(torch.bfloat16)
