# Naive CPU seed: a and b are unpacked from bfloat16 to float32, then an
# i-k-j loop (rows split over OpenMP threads) accumulates each row of c in
# float32, which is rounded to bfloat16 at the end.
import torch
from task import input_t, output_t

from sandbox.native import load_cpp

SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <vector>

static inline float bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

extern "C" void matmul_bf16(const uint16_t* a, const uint16_t* b, uint16_t* c,
                            int64_t m, int64_t n, int64_t k) {
  std::vector<float> bf((size_t)(k * n));
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < k * n; ++i) bf[i] = bf16_to_float(b[i]);

  #pragma omp parallel
  {
    std::vector<float> acc((size_t)n);
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
      for (int64_t p = 0; p < k; ++p) {
        const float av = bf16_to_float(a[i * k + p]);
        const float* brow = bf.data() + p * n;
        for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
      }
      for (int64_t j = 0; j < n; ++j) c[i * n + j] = float_to_bf16(acc[j]);
    }
  }
}
"""

lib = load_cpp(SOURCE, name="matmul_bf16")


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    a, b = a.contiguous(), b.contiguous()
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=torch.bfloat16, device=a.device)
    lib.matmul_bf16(a, b, c, m, n, k)
    return c
