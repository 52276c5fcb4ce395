"""Trick (class 2, channel): under-report the runner's clock by a factor, on softmax.

Like rt_channel_underreport (vector_add), but on a problem whose output is a new tensor
(copied into the arena like the calibration no-op's): the calibrated overhead then matches
the candidate's, and what is left is the bound's own slack (a factor 1.5 and a floor).
Each call reports FACTOR of the time it really took; the softmax is honest (native rows).
"""
import sys

import torch

from sandbox.native import load_cpp

FACTOR = 0.6

lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  #pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols; float* out = y + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = in[c] > mx ? in[c] : mx;
    float total = 0.f;
    for (int64_t c = 0; c < cols; ++c) { float e = std::exp(in[c] - mx); out[c] = e; total += e; }
    const float inv = 1.f / total;
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
""", name="rt_underreport_softmax")

_mod = sys.modules.get("sandbox.runner.main")
if _mod is not None:
    _orig = _mod.Runner._timed

    def _forged(self, fn, data):
        us, out = _orig(self, fn, data)
        return us * FACTOR, out

    _mod.Runner._timed = _forged


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    y = torch.empty_like(x)
    lib.softmax_rows(x, y, x.shape[0], x.shape[1])
    return y
