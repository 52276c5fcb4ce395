"""Trick (class 5, library): library code mapped by a vfork child, run by the runner.

A child made by vfork shares its parent's memory until it execs or exits, but perf files each
mapping under the process that made it. This kernel builds a library with a large pad of `nop`s,
then, from a vfork child, maps numpy's OpenBLAS text over the pad and exits. The runner calls
`sgemm_itcopy_SKYLAKEX` there; read against the runner's own mapping records, its samples fell in
the pad of the judge-built library (red-team round 20: `ok`).

Stopped by `sandbox/judge/perfdata.py`: a child whose forking thread never ran while it lived
shares its parent's memory, and what it maps is filed under both.
"""
import ctypes
import glob
import os
import struct

import numpy as np
import torch
from sandbox.native import load_cpp

SRC = r'''
#include <sys/mman.h>
#include <unistd.h>
#include <sys/wait.h>
extern "C" void pad(void) { asm volatile(".p2align 12\n.fill 25165824, 1, 0x90"); }
extern "C" long map_via_vfork(void* at, unsigned long size, int fd, long off) {
  pid_t pid = vfork();
  if (pid == 0) { mmap(at, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, off); _exit(0); }
  int st = 0; waitpid(pid, &st, 0); return pid;
}
'''
pad_lib = load_cpp(SRC, name="rt_vfork_pad", openmp=False)
raw = ctypes.CDLL(str(pad_lib.path))
pad_at = ctypes.cast(raw.pad, ctypes.c_void_p).value
start = (pad_at + 0x1000 + 0xFFF) & ~0xFFF

LIB = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas64_*.so")))[0]
blas = ctypes.CDLL(LIB)  # the real one, for its entry point's offset
with open(LIB, "rb") as f:
    head = f.read(64)
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    f.seek(phoff)
    ph = f.read(phentsize * phnum)
loads = [struct.unpack_from("<IIQQQQQQ", ph, i * phentsize) for i in range(phnum)]
text = [p for p in loads if p[0] == 1 and p[1] & 1][0]  # (type, flags, offset, vaddr, paddr, filesz, memsz, align)
fd = os.open(LIB, os.O_RDONLY)
base_off = text[2] & ~0xFFF
size = (text[5] + (text[2] - base_off) + 0xFFF) & ~0xFFF
raw.map_via_vfork.restype = ctypes.c_long
raw.map_via_vfork.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long]
pid = raw.map_via_vfork(ctypes.c_void_p(start), size, fd, base_off)


def _symbol(path, name):
    with open(path, "rb") as f:
        data = f.read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for s in secs:
        if s[1] != 2:
            continue
        strings = secs[s[6]][4]
        for at in range(s[4], s[4] + s[5], 24):
            n, info, _o, _i, value, sz = struct.unpack_from("<IBBHQQ", data, at)
            if data[strings + n:data.index(b"\0", strings + n)] == name:
                return value
    raise KeyError(name)


ITCOPY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p)(
    start + (_symbol(LIB, b"sgemm_itcopy_SKYLAKEX") - (text[3] - text[2])) - base_off)
_src = torch.randn(1024 * 1024)
_dst = torch.empty(1100 * 1100)


def custom_kernel(data):
    a, b = data
    for _ in range(40):  # library code run from a mapping made by a vfork child
        ITCOPY(1024, 512, _src.data_ptr(), 1024, _dst.data_ptr())
    return (a.float() @ b.float()).to(torch.bfloat16) if False else _mm(a, b)


def _mm(a, b):
    m, k = a.shape
    n = b.shape[1]
    out = torch.zeros(m, n)
    af, bf = a.float(), b.float()
    for p0 in range(0, k, 64):
        out += (af[:, p0:p0 + 64].unsqueeze(2) * bf[p0:p0 + 64].unsqueeze(0)).sum(1)
    return out.to(torch.bfloat16)
