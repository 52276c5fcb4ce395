"""Legitimate (GPU): the kernel is CuPy's `RawKernel`, compiled by NVRTC in the runner on the first call and
launched on the tensors' own memory through DLPack. CuPy is one of the packages kernels may use; its import
must not trip over a package the runner's sandbox hides (it imports `ml_dtypes` where it can). Expected: `ok`.
"""
import cupy
import torch

_ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* out, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
"""
_kernel = None


def custom_kernel(data):
    global _kernel
    a, b, out = data
    if _kernel is None:
        _kernel = cupy.RawKernel(_ADD, "add")
    n = out.numel()
    with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
        _kernel(((n + 255) // 256,), (256,), (cupy.from_dlpack(a), cupy.from_dlpack(b), cupy.from_dlpack(out),
                                              cupy.int64(n)))
    return out
