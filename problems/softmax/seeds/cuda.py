# Naive CUDA seed: one block of 256 threads per row; shared-memory tree
# reductions for the row maximum and the row sum, then a normalised write.
import torch
from task import input_t, output_t

from sandbox.native import load_cuda

SOURCE = r"""
#include <cstdint>
#include <cmath>

// @tunable THREADS: 64, 128, 256, 512, 1024  // a power of two: the tree reduction halves it
constexpr int THREADS = 256;

__global__ void softmax_kernel(const float* x, float* y, int64_t cols) {
  __shared__ float scratch[THREADS];
  const float* in = x + (int64_t)blockIdx.x * cols;
  float* out = y + (int64_t)blockIdx.x * cols;
  const int t = threadIdx.x;

  float mx = -INFINITY;
  for (int64_t c = t; c < cols; c += THREADS) mx = fmaxf(mx, in[c]);
  scratch[t] = mx;
  __syncthreads();
  for (int half = THREADS / 2; half > 0; half /= 2) {
    if (t < half) scratch[t] = fmaxf(scratch[t], scratch[t + half]);
    __syncthreads();
  }
  const float row_max = scratch[0];
  __syncthreads();

  float total = 0.0f;
  for (int64_t c = t; c < cols; c += THREADS) total += expf(in[c] - row_max);
  scratch[t] = total;
  __syncthreads();
  for (int half = THREADS / 2; half > 0; half /= 2) {
    if (t < half) scratch[t] += scratch[t + half];
    __syncthreads();
  }
  const float inv = 1.0f / scratch[0];

  for (int64_t c = t; c < cols; c += THREADS) out[c] = expf(in[c] - row_max) * inv;
}

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  if (rows > 0 && cols > 0) softmax_kernel<<<(unsigned)rows, THREADS>>>(x, y, cols);
}
"""

lib = load_cuda(SOURCE, name="softmax")


def custom_kernel(data: input_t) -> output_t:
    (x,) = data
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    lib.softmax_rows(x, y, rows, cols)
    return y
