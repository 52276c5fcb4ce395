"""Legitimate: an OpenMP native kernel via load_cpp (static schedule, SIMD hint), which
also records how many threads the last parallel region used."""
from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
#include <omp.h>
static int last_threads = 0;
extern "C" void vadd(const float* __restrict a, const float* __restrict b, float* __restrict out, int64_t n) {
  #pragma omp parallel
  {
    #pragma omp single
    last_threads = omp_get_num_threads();
    #pragma omp for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }
}
extern "C" int64_t threads_used() { return last_threads; }
""", name="legit_rt_openmp")


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
