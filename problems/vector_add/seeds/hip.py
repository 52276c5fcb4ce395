# Naive HIP seed for MI300 (competition form): one thread per element.
# HIP_KERNELS holds the device code alone (it compiles with hip_runtime.h only,
# which is what the static report builds); HIP_LAUNCHER adds the torch-facing
# launcher, and load_inline builds both for gfx942 on a ROCm PyTorch host.
import os
import shutil

from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

HIP_KERNELS = r"""
#include <hip/hip_runtime.h>
#include <cstdint>

// @tunable THREADS: 64, 128, 256, 512, 1024
constexpr int THREADS = 256;

__global__ void __launch_bounds__(THREADS)
add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ out, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""

HIP_LAUNCHER = r"""
void vector_add(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
  const int64_t n = a.numel();
  const int64_t blocks = (n + THREADS - 1) / THREADS;
  if (blocks == 0) return;
  hipLaunchKernelGGL(add_kernel, dim3((unsigned)blocks), dim3(THREADS), 0, 0,
                     static_cast<const float*>(a.data_ptr()), static_cast<const float*>(b.data_ptr()),
                     static_cast<float*>(out.data_ptr()), n);
}
"""

CPP_WRAPPER = "void vector_add(torch::Tensor a, torch::Tensor b, torch::Tensor out);"
CUDA_SRC = HIP_KERNELS + HIP_LAUNCHER

# The competition built with CXX=clang++ (ROCm's clang); keep a user's choice.
if shutil.which("clang++"):
    os.environ.setdefault("CXX", "clang++")

module = load_inline(
    name="ks_vector_add_hip",
    cpp_sources=[CPP_WRAPPER],
    cuda_sources=[CUDA_SRC],
    functions=["vector_add"],
    extra_cuda_cflags=["--offload-arch=gfx942", "-O3", "-std=c++17"],
    verbose=False,
)


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    module.vector_add(a, b, out)
    return out
