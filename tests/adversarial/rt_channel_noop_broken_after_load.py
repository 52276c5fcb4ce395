"""Trick (class 2, channel), aimed at the judge's second calibration: break the no-op once loaded.

The judge times its trusted no-op twice per shape: before the candidate loads, and again beside it, keeping the
smaller overhead of the two. A burst of host load during the first inflates its overhead, which is subtracted from
the judge's clock around every timed batch. This vector_add makes every no-op call fail once its code is in the
runner, hoping the judge falls back to the first calibration alone, and reports a fifth of each call's time.

A no-op that fails beside the candidate is the candidate's doing (the no-op is the judge's code, run by the
runner the candidate's code shares): the kernel's timing fails, saying so (sandbox/judge/timed.py's
`recalibrated`)."""
import sys

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_noop_broken_vadd", openmp=False)

_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _timed = _runner.Runner._timed

    def _broken_noop(*args, **kwargs):
        raise RuntimeError("no-op unavailable")

    def _forged(self, fn, data):
        us, out = _timed(self, fn, data)
        return us * 0.2, out

    _runner._noop = _broken_noop
    _runner.Runner._timed = _forged


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
