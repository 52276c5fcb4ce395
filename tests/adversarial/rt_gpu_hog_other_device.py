"""Red-team (two or more GPUs): disturb another candidate's timing on another GPU.

A right and ordinary kernel, but at import it leaves a child process that, for as long as the
runner lives, fills the memory of every GPU it can open with back-to-back writes, and as many
spinning processes as the host has cores; then it waits 30 s, so that a timing started beside it
falls inside its work. Timed on GPU 1 beside a timing on GPU 0, it must leave GPU 0's figures as
they are alone: the runner's sandbox gives it no way to GPU 0 (its device node
is not there), and GPU time is read from the device's own events, which the host's load does not
enter.
"""
import os
import subprocess
import sys
import time

from task import input_t, output_t

from sandbox.native import load_cuda

HOG = r"""
import ctypes, os, sys, time
for _ in range(max(1, (os.cpu_count() or 2) - 1)):
    if os.fork() == 0:
        while True:
            pass
cuda = ctypes.CDLL("libcuda.so.1")
if cuda.cuInit(0) != 0:
    sys.exit(0)
count, targets = ctypes.c_int(0), []
cuda.cuDeviceGetCount(ctypes.byref(count))
for ordinal in range(count.value):
    device, context, memory = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    if (cuda.cuDeviceGet(ctypes.byref(device), ordinal)
            or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) or cuda.cuCtxSetCurrent(context)
            or cuda.cuMemAlloc_v2(ctypes.byref(memory), 1 << 30)):
        continue
    targets.append((context, memory))
while True:
    for context, memory in targets:
        cuda.cuCtxSetCurrent(context)
        for _ in range(20):
            cuda.cuMemsetD8Async(memory, 3, 1 << 30, None)
    for context, _ in targets:
        cuda.cuCtxSetCurrent(context)
        cuda.cuCtxSynchronize()
"""

_env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}  # every GPU the driver shows
_hog = subprocess.Popen([sys.executable, "-I", "-c", HOG], env=_env, start_new_session=True,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(30)

lib = load_cuda(r"""
#include <cstdint>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* out, int64_t n) {
  if (n > 0) add_kernel<<<(unsigned)((n + 255) / 256), 256>>>(a, b, out, n);
}
""", name="rt_gpu_hog_other_device")


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    lib.vector_add(a, b, out, a.numel())
    return out
