"""Numerics (class 8): RMSNorm whose sum of squares is accumulated in bfloat16, one
element at a time in a native loop (the running sum rounded to bfloat16 after every add).

Once the running sum reaches 2^9 times an element's square, further squares round away
(bfloat16 has 8 significant bits), so with hidden in the thousands the sum stalls far
below its true value; the output is too large. Expected to fail ordinary tests already.
"""
from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstring>
static inline float bf(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; std::memcpy(&f, &b, 4); return f; }
static inline uint16_t tobf(float f) { uint32_t b; std::memcpy(&b, &f, 4); b += 0x7fffu + ((b >> 16) & 1u); return (uint16_t)(b >> 16); }
extern "C" void rms(const uint16_t* x, const uint16_t* w, uint16_t* out, int64_t rows, int64_t hidden) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t acc = 0;
    for (int64_t h = 0; h < hidden; ++h) { float v = bf(x[r * hidden + h]); acc = tobf(bf(acc) + v * v); }
    const float inv = 1.0f / std::sqrt(bf(acc) / (float)hidden + 1e-6f);
    for (int64_t h = 0; h < hidden; ++h) out[r * hidden + h] = tobf(bf(x[r * hidden + h]) * inv * bf(w[h]));
  }
}
""", name="rt_rms_bf16acc", openmp=False)


def custom_kernel(data):
    x, weight, out = data
    lib.rms(x.contiguous(), weight.contiguous(), out, x.shape[0], x.shape[1])
    return out
