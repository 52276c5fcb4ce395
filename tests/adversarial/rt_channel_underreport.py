"""Trick (class 2, channel): under-report the runner's own clock by a constant factor.

The runner's `Runner._timed` is replaced from inside the candidate so that every call
reports 20% of the time it really took. The output is honest (a native a + b), so only
the judge's clock bound (`bound_by_judge`) can notice. The slack of that bound (factor 1.5,
a 100 µs floor, and a calibration done with the no-op that clones the largest input) is
what this probes.
"""
import sys

from sandbox.native import load_cpp

FACTOR = 0.2

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_underreport_vadd")

_runner_mod = sys.modules.get("sandbox.runner.main")
if _runner_mod is not None:
    _orig_timed = _runner_mod.Runner._timed

    def _forged_timed(self, fn, data):
        us, out = _orig_timed(self, fn, data)
        return us * FACTOR, out

    _runner_mod.Runner._timed = _forged_timed


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
