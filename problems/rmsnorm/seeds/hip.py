# Naive HIP seed for MI300 (competition form): one workgroup of 256 threads per
# row; float32 sum of squares reduced in LDS, then a scaled write rounded to
# bfloat16. bf16 travels as raw 16-bit words, converted by hand, so the device
# code needs no bf16 header. HIP_KERNELS compiles alone for the static report.
import os
import shutil

from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

HIP_KERNELS = r"""
#include <hip/hip_runtime.h>
#include <cstdint>

// @tunable THREADS: 64, 128, 256, 512, 1024  // a power of two: the tree reduction halves it
constexpr int THREADS = 256;

__device__ inline float bf16_to_float(uint16_t v) { return __uint_as_float((uint32_t)v << 16); }

__device__ inline uint16_t float_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);                      // round to nearest even
  return (uint16_t)(u >> 16);
}

__global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const uint16_t* __restrict__ x, const uint16_t* __restrict__ w,
               uint16_t* __restrict__ out, int64_t hidden, float eps) {
  __shared__ float partial[THREADS];
  const uint16_t* in = x + (int64_t)blockIdx.x * hidden;
  uint16_t* dst = out + (int64_t)blockIdx.x * hidden;
  const int t = threadIdx.x;

  float sum = 0.0f;
  for (int64_t h = t; h < hidden; h += THREADS) {
    const float v = bf16_to_float(in[h]);
    sum += v * v;
  }
  partial[t] = sum;
  __syncthreads();
  for (int half = THREADS / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  const float inv_rms = rsqrtf(partial[0] / (float)hidden + eps);

  for (int64_t h = t; h < hidden; h += THREADS)
    dst[h] = float_to_bf16(bf16_to_float(in[h]) * inv_rms * bf16_to_float(w[h]));
}
"""

HIP_LAUNCHER = r"""
void rmsnorm(torch::Tensor x, torch::Tensor w, torch::Tensor out, double eps) {
  const int64_t rows = x.size(0), hidden = x.size(1);
  if (rows == 0 || hidden == 0) return;
  hipLaunchKernelGGL(rmsnorm_kernel, dim3((unsigned)rows), dim3(THREADS), 0, 0,
                     static_cast<const uint16_t*>(x.data_ptr()), static_cast<const uint16_t*>(w.data_ptr()),
                     static_cast<uint16_t*>(out.data_ptr()), hidden, (float)eps);
}
"""

CPP_WRAPPER = "void rmsnorm(torch::Tensor x, torch::Tensor w, torch::Tensor out, double eps);"
CUDA_SRC = HIP_KERNELS + HIP_LAUNCHER

if shutil.which("clang++"):
    os.environ.setdefault("CXX", "clang++")

module = load_inline(
    name="ks_rmsnorm_hip",
    cpp_sources=[CPP_WRAPPER],
    cuda_sources=[CUDA_SRC],
    functions=["rmsnorm"],
    extra_cuda_cflags=["--offload-arch=gfx942", "-O3", "-std=c++17"],
    verbose=False,
)


def custom_kernel(data: input_t) -> output_t:
    x, weight, out = data
    module.rmsnorm(x.contiguous(), weight.contiguous(), out, 1e-6)
    return out
