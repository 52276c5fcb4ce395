"""Trick (class 3 with class 2, against the fresh runner): be honest where the check phase ran, and answer
garbage only in a runner that no test ever called.

The judge checks a kernel in its first runner. Where its clock contradicts every attempt at a shape's timing
there, it loads the kernel (the candidate, or a paired base) into a fresh runner and times the shape without
running the check phase again. So this vector_add reports a fifth of each call's time once it has been called on
a tiny input (a test), which the judge's clock contradicts, and in a runner that never saw a tiny input it
skips the addition and returns its output untouched. A fresh runner's timed calls are checked as every timed
call is: the first one after the warm-up, any call faster than the median so far, and a secret half.
As a candidate it is refused `timed-output-wrong`; as a base it ends the pairing, never the candidate's verdict
(tests/test_paired.py).
"""
import sys

from sandbox.native import load_cpp

FACTOR = 0.2
_checked_here = False

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_renewal_unchecked_vadd")

_runner_mod = sys.modules.get("sandbox.runner.main")
if _runner_mod is not None:
    _orig_timed = _runner_mod.Runner._timed

    def _timed(self, fn, data):
        us, out = _orig_timed(self, fn, data)
        return (us * FACTOR if _checked_here else us), out

    _runner_mod.Runner._timed = _timed


def custom_kernel(data):
    global _checked_here
    a, b, out = data
    if a.numel() <= 1000:
        _checked_here = True
    if _checked_here:
        lib.vadd(a, b, out, a.numel())
    return out
