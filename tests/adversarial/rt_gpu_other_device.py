"""Red-team (two or more GPUs): reach a GPU other than the one the runner was given.

At import, child processes ask the CUDA driver for every GPU, by index (with CUDA_VISIBLE_DEVICES
set to each index in turn) and with the variable unset, and write to the memory of each GPU they
open. The output is right only while the runner's own GPU alone answered: the verdict is `ok`
exactly where the sandbox kept the other GPUs out of reach, and wrong where it did not. A probe
that cannot open even the runner's own GPU raises, so a broken probe never passes quietly.
"""
import os
import subprocess
import sys

from task import input_t, output_t

from sandbox.native import load_cuda

PROBE = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
if cuda.cuInit(0) != 0:
    sys.exit(0)
count = ctypes.c_int(0)
cuda.cuDeviceGetCount(ctypes.byref(count))
for ordinal in range(count.value):
    device, context, memory = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    uuid = (ctypes.c_ubyte * 16)()
    if (cuda.cuDeviceGet(ctypes.byref(device), ordinal) or cuda.cuDeviceGetUuid(uuid, device)
            or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) or cuda.cuCtxSetCurrent(context)
            or cuda.cuMemAlloc_v2(ctypes.byref(memory), 1 << 20) or cuda.cuMemsetD8_v2(memory, 7, 1 << 20)
            or cuda.cuCtxSynchronize()):
        continue
    print(bytes(uuid).hex(), flush=True)
"""


def _reached(visible: str | None) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    done = subprocess.run([sys.executable, "-I", "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    return set(done.stdout.split())


OWN = _reached(os.environ.get("CUDA_VISIBLE_DEVICES"))
if len(OWN) != 1:
    raise RuntimeError(f"the probe could not open the runner's own GPU (it answered {sorted(OWN)})")
OTHERS = set().union(*(_reached(str(index)) for index in range(8)), _reached(None)) - OWN

lib = load_cuda(r"""
#include <cstdint>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n, double sign) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + (float)sign * b[i];
}
extern "C" void vector_add(const float* a, const float* b, float* out, int64_t n, double sign) {  // a Python float arrives as a double
  if (n > 0) add_kernel<<<(unsigned)((n + 255) / 256), 256>>>(a, b, out, n, sign);
}
""", name="rt_gpu_other_device")


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    lib.vector_add(a, b, out, a.numel(), -1.0 if OTHERS else 1.0)  # wrong wherever another GPU answered
    return out
