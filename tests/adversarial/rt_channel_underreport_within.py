"""Trick (class 2, channel): under-report by just enough to stay inside the judge's allowance.

The judge rejects a runner whose figure falls short of its own clock by more than a factor, a
floor and the calibration's noise; a runner that reports each call 120 µs shorter than it was stays
inside the floor alone. The output is honest (a native a + b); only the figure is forged, by
replacing the runner's `Runner._timed` from inside the candidate.

Nothing to reject, so nothing to gain: on the CPU a batch's figure is never less than what the
judge's own clock saw of it beyond the overhead and its noise (sandbox/judge/bound.py's `batch_figure`);
the verdict times this kernel as it times the same kernel reporting honestly."""
import sys

from sandbox.native import load_cpp

HIDDEN_US = 120.0

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_underreport_within", openmp=False)

_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _timed = _runner.Runner._timed
    _runner.Runner._timed = lambda self, fn, data: (lambda us, out: (max(0.0, us - HIDDEN_US), out))(*_timed(self, fn, data))


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
