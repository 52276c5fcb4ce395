"""Trick (class 2, channel): under-report, and say the missing time went where the judge's clock is not the runner's.

Against the seventeenth session's change: a runner now says, beside each batch, the time from the request's arrival
to the batch's start and its collection after the previous answer, where a kernel's round trips were seen to spend
30 µs a call more than the no-op's. This kernel reports a fifth of each call's time (`Runner._timed`) and writes the
rest into those two figures, as if the round trip's excess were the runner's own housekeeping. The figures are shown
beside the judge's clock and never believed, so the judge's bound and floor must decide as if they were absent.
"""
import sys

from sandbox.native import load_cpp

FACTOR = 0.2

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_forged_steps_vadd")

_runner_mod = sys.modules.get("sandbox.runner.main")
if _runner_mod is not None:
    _orig_timed = _runner_mod.Runner._timed
    _orig_batch = _runner_mod.Runner.on_batch
    _hidden = {"us": 0.0}

    def _forged_timed(self, fn, data):
        us, out = _orig_timed(self, fn, data)
        _hidden["us"] += us * (1 - FACTOR)
        return us * FACTOR, out

    def _forged_batch(self, request, fds):
        _hidden["us"] = 0.0
        answer = _orig_batch(self, request, fds)
        said = answer.get("batch_us")
        if isinstance(said, list) and len(said) >= 6:
            said[4] += _hidden["us"] / 2  # "the request was slow to arrive"
            said[5] += _hidden["us"] / 2  # "the collection ran long"
        return answer

    _runner_mod.Runner._timed = _forged_timed
    _runner_mod.Runner.on_batch = _forged_batch


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
