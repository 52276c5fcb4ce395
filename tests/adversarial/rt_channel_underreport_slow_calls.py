"""Trick (class 2 with class 3, channel): report every call at the fastest time seen for its size.

A noisy host makes some calls slow; a runner that reports each call at its best time so far hides those, and
with them anything slow it does on purpose. This vector_add sleeps 1 ms in every other call (the idle work a
busy host would put there) and reports each call as the fastest call of its size so far, so its figures look
quick and steady. Where the judge took an allowance for its calibration's noise off the round trip, the slow
calls hid inside it on a noisy host.

Nothing to gain over a kernel that does not sleep: on the CPU a batch's figure is never less than the work the
judge's clocks saw (sandbox/judge/bound.py's `batch_figure`: the CPU time its runner used, and the round trip
less the calibration's noise, in which a noisy host can still hide a sleep, which is no work); beyond the
bound's allowance it is `timing-contradicted`."""
import sys
import time

from sandbox.native import load_cpp

SLEEP_S = 0.001

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_underreport_slow_calls", openmp=False)

_best: dict[int, float] = {}
_calls = [0]

_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _timed = _runner.Runner._timed

    def _at_best(self, fn, data):
        us, out = _timed(self, fn, data)
        size = data[0].numel() if isinstance(data, (tuple, list)) and hasattr(data[0], "numel") else 0
        _best[size] = min(us, _best.get(size, us))
        return _best[size], out

    _runner.Runner._timed = _at_best


def custom_kernel(data):
    a, b, out = data
    _calls[0] += 1
    if _calls[0] % 2 == 0:
        time.sleep(SLEEP_S)
    lib.vadd(a, b, out, a.numel())
    return out
