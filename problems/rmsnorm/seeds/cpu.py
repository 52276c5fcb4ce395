# Naive CPU seed: one row per OpenMP iteration; bfloat16 is unpacked to float
# by shifting its 16 bits up, and packed back with round-to-nearest-even.
# The sum of squares runs in LANES independent partial sums (tunable): without
# -ffast-math the compiler keeps a single float sum in order, a serial chain.
from task import input_t, output_t

from sandbox.native import load_cpp

SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>

// @tunable LANES: 1, 2, 4, 8, 16, 32
#define LANES 2

static inline float bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return (uint16_t)(bits >> 16);
}

extern "C" void rmsnorm(const uint16_t* x, const uint16_t* w, uint16_t* out,
                        int64_t rows, int64_t hidden, double eps) {
  #pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* in = x + r * hidden;
    uint16_t* dst = out + r * hidden;
    float part[LANES] = {};
    int64_t h = 0;
    for (; h + LANES <= hidden; h += LANES)
      for (int l = 0; l < LANES; ++l) {
        const float v = bf16_to_float(in[h + l]);
        part[l] += v * v;
      }
    float sum = 0.0f;
    for (int l = 0; l < LANES; ++l) sum += part[l];
    for (; h < hidden; ++h) {
      const float v = bf16_to_float(in[h]);
      sum += v * v;
    }
    const float inv_rms = 1.0f / std::sqrt(sum / (float)hidden + (float)eps);
    for (int64_t h = 0; h < hidden; ++h)
      dst[h] = float_to_bf16(bf16_to_float(in[h]) * inv_rms * bf16_to_float(w[h]));
  }
}
"""

lib = load_cpp(SOURCE, name="rmsnorm")


def custom_kernel(data: input_t) -> output_t:
    x, weight, out = data
    rows, hidden = x.shape
    lib.rmsnorm(x.contiguous(), weight.contiguous(), out, rows, hidden, 1e-6)
    return out
