"""Legitimate: copy a into the output, then add b in place with a native kernel."""
from sandbox.native import load_cpp

lib = load_cpp(r'''
#include <cstdint>
extern "C" void add_inplace(float* out, const float* b, int64_t n) {
  #pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] += b[i];
}
''', name="inplace")


def custom_kernel(data):
    a, b, out = data
    out.copy_(a)
    lib.add_inplace(out, b, a.numel())
    return out
