"""Trick (class 5 with class 2, against the fresh runner): use a forbidden library only in the runner that gets
replaced, and be honest in the one that replaces it.

Once its runner has been called on a tiny input (the check phase ran there), this vector_add adds with numpy
(a forbidden symbol) and reports a fifth of each call's time, so the judge's clock contradicts every attempt in
that runner. The judge then times the shape in a fresh runner, where the kernel adds with its own loop and
reports honestly: that timing agrees. Were what the first runner ran forgotten with it, the verdict would be
`ok`; its samples and page tables are judged before it goes.
"""
import sys

import numpy as np

from sandbox.native import load_cpp

FACTOR = 0.2
_first_runner = False

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_renewal_forbidden_vadd")

_runner_mod = sys.modules.get("sandbox.runner.main")
if _runner_mod is not None:
    _orig_timed = _runner_mod.Runner._timed

    def _timed(self, fn, data):
        us, out = _orig_timed(self, fn, data)
        return (us * FACTOR if _first_runner else us), out

    _runner_mod.Runner._timed = _timed


def custom_kernel(data):
    global _first_runner
    a, b, out = data
    if a.numel() <= 1000:
        _first_runner = True
    if _first_runner:
        np.add(a.numpy(), b.numpy(), out=out.numpy())
    else:
        lib.vadd(a, b, out, a.numel())
    return out
