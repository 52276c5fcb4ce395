"""Trick (class 2, channel), aimed at the judge's second calibration: once loaded, the candidate
slows every no-op batch the judge sends (a sleep, which costs no CPU time) so that the overhead
measured beside it comes out large, then reports a fifth of each call's time. A large overhead
would widen the allowance and subtract the kernel's own time from the judge's clock. The judge
keeps the smaller of its two calibrations, so the slowed one is never used."""
import sys
import time

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_slow_noop_vadd")

_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _on_batch, _timed = _runner.Runner.on_batch, _runner.Runner._timed

    def _slowed(self, request, fds):
        if request.get("kernel") == "noop":
            time.sleep(0.05)
        return _on_batch(self, request, fds)

    def _forged(self, fn, data):
        us, out = _timed(self, fn, data)
        return us * 0.2, out

    _runner.Runner.on_batch = _slowed
    _runner.Runner._timed = _forged


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
