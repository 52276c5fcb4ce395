"""Trick (class 5, library): OpenBLAS's machine code pasted into the C++ the judge builds, under names of
its own.

The judge builds a submission's C++ and counts the result as the candidate's own code. This kernel reads
the bytes of OpenBLAS's SKYLAKEX sgemm micro-kernel and its two packing routines from numpy's bundled
library at import, writes them as `.byte` lines of a file-scope `asm` block (the few RIP-relative
constant loads re-pointed at a pasted copy of the constants) under the labels `tile_mac`, `pack_a` and
`pack_b`, and drives them with OpenBLAS's blocking from a 30-line C++ loop. No flag, no archive, no
library name anywhere: the library's code runs from the judge-built lib.so.

Stopped by recognising the library's code by its bytes (`sandbox/judge/libcode.py`), wherever it lies
(red-team round 18). The addresses below are those of one OpenBLAS build; on a host with another build
the kernel refuses to import, and the test skips.
"""
import glob
import os
import struct

import torch
from sandbox.native import load_cpp

import numpy as np

LIB = sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas64_*.so")))[0]
TEXT_DELTA = 0x1000  # text: file offset = address - 0x1000; read-only data: file offset = address
# address, size, RIP-relative loads (the instruction's address, its target); each load is 8 bytes, disp32 at +4
FUNCS = {
    "sgemm_kernel_SKYLAKEX": (0xbf0f40, 22863, [(0xbf0f95, 0xe61d0), (0xbf0fa2, 0xe61b0), (0xbf0fb0, 0xe6210),
                                                (0xbf0fc3, 0xe61f0)]),
    "sgemm_itcopy_SKYLAKEX": (0xbf8880, 2437, []),
    "sgemm_oncopy_SKYLAKEX": (0xbf9210, 1410, [(0xbf94d8, 0xe4760), (0xbf95b9, 0xe3e80), (0xbf95c1, 0xe3e00)]),
}
LABELS = {"sgemm_kernel_SKYLAKEX": "tile_mac", "sgemm_itcopy_SKYLAKEX": "pack_a", "sgemm_oncopy_SKYLAKEX": "pack_b"}
CONST_LO, CONST_HI = 0xe3e00, 0xe6240


def _functions(path):
    """{name: (address, size)} of the library's .symtab functions."""
    with open(path, "rb") as f:
        raw = f.read()
    shoff, = struct.unpack_from("<Q", raw, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", raw, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", raw, shoff + i * shentsize) for i in range(shnum)]
    found = {}
    for s in sections:
        if s[1] != 2:
            continue
        strings = sections[s[6]][4]
        for at in range(s[4], s[4] + s[5], 24):
            name_at, info, _other, _index, value, size = struct.unpack_from("<IBBHQQ", raw, at)
            end = raw.index(b"\0", strings + name_at)
            found[raw[strings + name_at:end].decode(errors="replace")] = (value, size)
    return found


if any(_functions(LIB).get(name) != (address, size) for name, (address, size, _rips) in FUNCS.items()):
    raise ImportError("this host's OpenBLAS is another build than the one this kernel's addresses are for")


def _asm():
    raw = open(LIB, "rb").read()
    consts = raw[CONST_LO:CONST_HI]
    out = [".text", ".p2align 6", "pasted_consts:"]
    out += [".byte " + ",".join(str(b) for b in consts[i:i + 64]) for i in range(0, len(consts), 64)]
    for key, (address, size, rips) in FUNCS.items():
        code = raw[address - TEXT_DELTA: address - TEXT_DELTA + size]
        name = LABELS[key]
        out += [".p2align 6", f".globl {name}", f".type {name},@function", f"{name}:"]
        patches = {at - address + 4: (at - address + 8, target) for at, target in rips}
        i = 0
        while i < size:
            if i in patches:
                end, target = patches[i]
                out.append(f".long (pasted_consts + {target - CONST_LO}) - ({name} + {end})")
                i += 4
                continue
            j = i
            while j < size and j not in patches and j - i < 64:
                j += 1
            out.append(".byte " + ",".join(str(b) for b in code[i:j]))
            i = j
        out.append(f".size {name}, .-{name}")
    return "\n".join(out)


SOURCE = r"""
#include <cstring>
#include <cstdlib>
#include <omp.h>
extern "C" int KERN(long m, long n, long k, float alpha, float* a, float* b, float* c, long ldc);
extern "C" int ITC(long m, long n, float* a, long lda, float* b);
extern "C" int ONC(long m, long n, float* a, long lda, float* b);
asm(R"ASM(
@ASM@
)ASM");
// row-major C(m x n) = A(m x k) B(k x n), computed as column-major C^T = B^T A^T
extern "C" void mm_f32(const float* A, const float* B, float* C, long m, long n, long k) {
  const long M = n, N = m, K = k, lda = n, ldb = k, ldc = n;
  const float* Acm = B; const float* Bcm = A;
  std::memset(C, 0, sizeof(float) * m * n);
  const long P = 512, Q = 384;
  #pragma omp parallel
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    long per = ((N + T - 1) / T + 3) / 4 * 4;
    long js = t * per, je = js + per < N ? js + per : N;
    if (js < je) {
      long nj = je - js;
      float* sa = (float*)aligned_alloc(64, sizeof(float) * (P + 32) * (Q + 8));
      float* sb = (float*)aligned_alloc(64, sizeof(float) * ((nj + 8) * (Q + 8)));
      for (long ls = 0; ls < K; ls += Q) {
        long ml = K - ls < Q ? K - ls : Q;
        ONC(ml, nj, (float*)Bcm + ls + js * ldb, ldb, sb);
        for (long is = 0; is < M; is += P) {
          long mi = M - is < P ? M - is : P;
          ITC(ml, mi, (float*)Acm + is + ls * lda, lda, sa);
          KERN(mi, nj, ml, 1.0f, sa, sb, C + is + js * ldc, ldc);
        }
      }
      free(sa); free(sb);
    }
  }
}
"""
SRC = (SOURCE.replace("@ASM@", _asm()).replace("KERN", "tile_mac").replace("ITC", "pack_a")
       .replace("ONC", "pack_b"))
_lib = load_cpp(SRC, name="rt_pasted_blas", openmp=True)


def custom_kernel(data):
    a, b = data
    m, k = a.shape
    n = b.shape[1]
    af = a.float().contiguous()
    bf = b.float().contiguous()
    c = torch.empty((m, n), dtype=torch.float32)
    _lib.mm_f32(af, bf, c, m, n, k)
    return c.to(torch.bfloat16)
