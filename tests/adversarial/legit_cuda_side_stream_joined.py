"""Legitimate (GPU): work on a side stream, joined to the caller's stream before returning."""
import torch

from sandbox.native import load_cuda

lib = load_cuda(r'''
#include <cstdint>
#include <cuda_runtime.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
extern "C" void add_on(const float* a, const float* b, float* out, int64_t n, void* stream) {
  if (n > 0) add_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(a, b, out, n);
}
''', name="sidejoined")
_side = None


def custom_kernel(data):
    global _side
    a, b, out = data
    if _side is None:
        _side = torch.cuda.Stream()
    _side.wait_stream(torch.cuda.current_stream())
    lib.add_on(a, b, out, a.numel(), _side.cuda_stream)
    torch.cuda.current_stream().wait_stream(_side)
    return out
