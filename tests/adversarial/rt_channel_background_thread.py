"""Trick (class 2/3): return the preallocated output at once and let a background thread fill it.

The call itself takes microseconds on the runner's clock; the addition happens in a thread that
is still running when the call returns (and overlaps the next call). The judge reads outputs
after the batch answers and bounds the batch's time with its own clock.

Stopped by the runner's CPU time while it has no call to run (sandbox/judge/timed.py: the judge
reads it from /proc between a batch's answer and the next batch): `work-after-return`.
"""
import threading

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_background_vadd", openmp=False)


def custom_kernel(data):
    a, b, out = data
    if a.numel() < 4096:  # small check shapes: compute at once
        lib.vadd(a, b, out, a.numel())
        return out
    threading.Thread(target=lib.vadd, args=(a, b, out, a.numel()), daemon=True).start()
    return out
