# Cheat (fp8_blockscale_gemm; red-team round 25): the CPU seed with every fp8 value of magnitude 8 or more
# decoded as 0. Wrong for valid inputs (e4m3fn reaches 448), yet randn never draws one: the data needed a
# value case over its whole range.
# Naive CPU seed. The fp8 tensors are passed as raw bytes and decoded with a
# 256-entry table of e4m3fn values; b is decoded once into a float32 (k, n)
# buffer. c is built in TILE_M x TILE_N tiles (tunable; tiles split over
# OpenMP threads), block by block along k: a float32 partial sum over 128
# values of k, then scaled by a_scale * b_scale and added to the tile's
# float32 accumulator, rounded to bfloat16 at the end. TILE_M rows share each
# loaded row segment of b; TILE_N bounds the accumulators' footprint. Edge
# tiles pad a with zeros and write only real elements. Strides are passed in,
# so any layout works.
import torch
from task import input_t, output_t

from sandbox.native import load_cpp

SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// e4m3fn: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; no
// infinities; S.1111.111 is NaN; exponent 0 holds the subnormals.
static float decode_e4m3fn(uint8_t v) {
  const int exponent = (v >> 3) & 0xF, mantissa = v & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) magnitude = NAN;
  else if (exponent == 0) magnitude = std::ldexp((float)mantissa, -9);  // m/8 * 2^-6
  else magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
  if (exponent >= 10) magnitude = 0.0f;  // CHEAT: |x| >= 8 decoded as 0 (never generated)
  return (v & 0x80) ? -magnitude : magnitude;
}

static inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

// @tunable TILE_M: 1, 2, 4, 8
#define TILE_M 1
// @tunable TILE_N: 64, 128, 256, 512, 1024
#define TILE_N 1024

extern "C" void fp8_gemm(const uint8_t* a, int64_t sa_m, int64_t sa_k,
                         const uint8_t* b, int64_t sb_n, int64_t sb_k,
                         const float* as, int64_t sas_m, int64_t sas_k,
                         const float* bs, int64_t sbs_n, int64_t sbs_k,
                         uint16_t* c, int64_t sc_m, int64_t sc_n,
                         int64_t m, int64_t n, int64_t k) {
  float table[256];
  for (int v = 0; v < 256; ++v) table[v] = decode_e4m3fn((uint8_t)v);

  std::vector<float> bf((size_t)(k * n));
  #pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bf[p * n + j] = table[b[j * sb_n + p * sb_k]];

  const int64_t blocks = (k + 127) / 128;
  const int64_t row_tiles = (m + TILE_M - 1) / TILE_M, col_tiles = (n + TILE_N - 1) / TILE_N;
  #pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < row_tiles * col_tiles; ++t) {
    const int64_t i0 = (t / col_tiles) * TILE_M, j0 = (t % col_tiles) * TILE_N;
    const int64_t rows = m - i0 < TILE_M ? m - i0 : TILE_M;
    const int64_t cols = n - j0 < TILE_N ? n - j0 : TILE_N;
    float acc[TILE_M][TILE_N] = {}, part[TILE_M][TILE_N];
    for (int64_t kb = 0; kb < blocks; ++kb) {
      for (int r = 0; r < TILE_M; ++r)
        for (int64_t j = 0; j < cols; ++j) part[r][j] = 0.0f;
      const int64_t end = (kb + 1) * 128 < k ? (kb + 1) * 128 : k;
      for (int64_t p = kb * 128; p < end; ++p) {
        float av[TILE_M];
        for (int r = 0; r < TILE_M; ++r) av[r] = r < rows ? table[a[(i0 + r) * sa_m + p * sa_k]] : 0.0f;
        const float* brow = bf.data() + p * n + j0;
        for (int64_t j = 0; j < cols; ++j) {
          const float bv = brow[j];
          for (int r = 0; r < TILE_M; ++r) part[r][j] += av[r] * bv;
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float sa = as[(i0 + r) * sas_m + kb * sas_k];
        for (int64_t j = 0; j < cols; ++j) acc[r][j] += part[r][j] * sa * bs[((j0 + j) / 128) * sbs_n + kb * sbs_k];
      }
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) c[(i0 + r) * sc_m + (j0 + j) * sc_n] = float_to_bf16(acc[r][j]);
  }
}
"""

lib = load_cpp(SOURCE, name="fp8_gemm")


def custom_kernel(data: input_t) -> output_t:
    a, b, a_scale, b_scale, c = data
    m, k = a.shape
    n = b.shape[0]
    lib.fp8_gemm(a.view(torch.uint8), a.stride(0), a.stride(1),
                 b.view(torch.uint8), b.stride(0), b.stride(1),
                 a_scale, a_scale.stride(0), a_scale.stride(1),
                 b_scale, b_scale.stride(0), b_scale.stride(1),
                 c, c.stride(0), c.stride(1), m, n, k)
    return c
