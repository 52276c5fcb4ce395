"""Trick (class 5, library): numpy's own float32 matmul (OpenBLAS sgemm, at the library's own address),
masked by the mappings of a forked child.

At import a plain fork() child maps the nop pad of a judge-built library over the executable text of
numpy's OpenBLAS and of _multiarray_umath, in its own copy of memory, and exits while the runner waits
for it. A child whose forking thread is never sampled may be a vfork child sharing its parent's memory
(`rt_library_vfork_mapping`), and its mappings were filed under the runner in place of the runner's own:
every sample in sgemm read as the pad (red-team round 21: `ok`, twice).

Stopped by `sandbox/judge/perfdata.py`: such a child's mappings are filed under its parent only as an
alternative reading (`Hit.also`), never in place of the parent's own, and either reading can make a
sample forbidden.
"""
import ctypes
import os

import numpy as np
import torch
from sandbox.native import load_cpp

SRC = r'''
#include <sys/mman.h>
#include <unistd.h>
#include <sys/wait.h>
extern "C" void pad(void) { asm volatile(".p2align 12\n.fill 25165824, 1, 0x90"); }
extern "C" long mask_via_fork(const unsigned long* at, const unsigned long* size, long n, int fd, long off) {
  pid_t pid = fork();  // its own copy of memory; the parent waits, never sampled meanwhile
  if (pid == 0) {
    for (long i = 0; i < n; i++) mmap((void*)at[i], size[i], PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, off);
    _exit(0);
  }
  int st = 0; waitpid(pid, &st, 0); return pid;
}
'''
pad_lib = load_cpp(SRC, name="rt_fork_mask_pad", openmp=False)
raw = ctypes.CDLL(str(pad_lib.path))
pad_at = ctypes.cast(raw.pad, ctypes.c_void_p).value
MASK = True
if MASK:
    targets, pad_off, pad_fd = [], None, None
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) < 6 or "x" not in f[1]:
            continue
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if f[5] == str(pad_lib.path) and lo <= pad_at < hi:
            pad_fd = os.open(f[5], os.O_RDONLY)
            pad_off = ((pad_at + 0xFFF) & ~0xFFF) - lo + int(f[2], 16)
        elif "openblas" in f[5] or "_multiarray_umath" in f[5]:
            targets.append((lo, hi - lo))
    assert pad_fd is not None and targets and all(s <= 24 << 20 for _, s in targets)
    n = len(targets)
    at = (ctypes.c_ulong * n)(*[t[0] for t in targets])
    sz = (ctypes.c_ulong * n)(*[t[1] for t in targets])
    raw.mask_via_fork.restype = ctypes.c_long
    raw.mask_via_fork.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_long]
    pid = raw.mask_via_fork(at, sz, n, pad_fd, pad_off)


def custom_kernel(data):
    a, b = data
    return torch.from_numpy(a.float().numpy() @ b.float().numpy()).to(torch.bfloat16)
