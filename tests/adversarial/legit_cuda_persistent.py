"""Legitimate (GPU): a persistent grid-stride kernel sized to the SMs, two launches per call."""
import torch

from sandbox.native import load_cuda

lib = load_cuda(r'''
#include <cstdint>
__global__ void copy_kernel(const float* a, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = a[i];
}
__global__ void add_kernel(float* out, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] += b[i];
}
extern "C" void persistent_add(const float* a, const float* b, float* out, int64_t n, int64_t sms) {
  if (n == 0) return;
  copy_kernel<<<(unsigned)(sms * 4), 256>>>(a, out, n);
  add_kernel<<<(unsigned)(sms * 4), 256>>>(out, b, n);
}
''', name="persistent")
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1


def custom_kernel(data):
    a, b, out = data
    lib.persistent_add(a, b, out, a.numel(), SMS)
    return out
