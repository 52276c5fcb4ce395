"""Trick (class 3, where nobody looks): honest on the test shapes, but on the benchmark shapes
(sizes that are powers of two) it leaves a mark in its input `a` after computing the output. A
judge that compares inputs only in the check phase misses it; the timed calls' checks must not."""
from sandbox.native import load_cpp

lib = load_cpp(r'''
#include <cstdint>
extern "C" void add_and_mark(float* a, const float* b, float* out, int64_t n, int mark) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  if (mark) a[0] = 0.f;
}
''', name="mutate_timed", openmp=False)


def custom_kernel(data):
    a, b, out = data
    n = a.numel()
    lib.add_and_mark(a, b, out, n, int(n >= 1 << 20 and n & (n - 1) == 0))
    return out
