# Naive CUDA seed: one block of 256 threads per row; float32 sum of squares
# reduced in shared memory, then a scaled write rounded to bfloat16.
from task import input_t, output_t

from sandbox.native import load_cuda

SOURCE = r"""
#include <cstdint>
#include <cuda_bf16.h>

// @tunable THREADS: 64, 128, 256, 512, 1024  // a power of two: the tree reduction halves it
constexpr int THREADS = 256;

__global__ void rmsnorm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w,
                               __nv_bfloat16* out, int64_t hidden, float eps) {
  __shared__ float partial[THREADS];
  const __nv_bfloat16* in = x + (int64_t)blockIdx.x * hidden;
  __nv_bfloat16* dst = out + (int64_t)blockIdx.x * hidden;
  const int t = threadIdx.x;

  float sum = 0.0f;
  for (int64_t h = t; h < hidden; h += THREADS) {
    float v = __bfloat162float(in[h]);
    sum += v * v;
  }
  partial[t] = sum;
  __syncthreads();
  for (int half = THREADS / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / (float)hidden + eps);

  for (int64_t h = t; h < hidden; h += THREADS) {
    float v = __bfloat162float(in[h]) * inv_rms * __bfloat162float(w[h]);
    dst[h] = __float2bfloat16(v);
  }
}

extern "C" void rmsnorm(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* out,
                        int64_t rows, int64_t hidden, double eps) {
  if (rows > 0 && hidden > 0)
    rmsnorm_kernel<<<(unsigned)rows, THREADS>>>(x, w, out, hidden, (float)eps);
}
"""

lib = load_cuda(SOURCE, name="rmsnorm")


def custom_kernel(data: input_t) -> output_t:
    x, weight, out = data
    rows, hidden = x.shape
    lib.rmsnorm(x.contiguous(), weight.contiguous(), out, rows, hidden, 1e-6)
    return out
