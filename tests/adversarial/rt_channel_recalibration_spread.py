"""Trick (class 2, channel): widen the second calibration's spread without reporting more time
than passes, then under-report every call.

As rt_channel_recalibration_overreport, but every no-op figure fits inside the runner's own time
for its batch (so inside the judge's round trip): the three quiet counted batches report 95% of
what the runner itself spent on them, which leaves the judge an overhead of little more than the
channel's, smaller than the first calibration's; the two others burn the CPU for 300 ms before
answering honestly. A calibration kept whole for its smaller overhead brings a spread of 300 ms
with it. The output is the honest sum.
"""
import sys
import time

from sandbox.native import load_cpp

FACTOR = 0.05
BURN_S = 0.3

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_recal_spread_vadd")

_noop_batches = [0]
_runner_mod = sys.modules.get("sandbox.runner.main")
if _runner_mod is not None:
    _orig_batch = _runner_mod.Runner.on_batch

    def _shaped_batch(self, request, fds):
        started = time.perf_counter()
        if request.get("kernel") == "noop":
            k = _noop_batches[0] % 6  # six no-op batches a calibration, the first not counted
            _noop_batches[0] += 1
            if k in (4, 5):
                end = time.perf_counter() + BURN_S
                while time.perf_counter() < end:
                    pass
                return _orig_batch(self, request, fds)
            reply = _orig_batch(self, request, fds)
            done = [r for r in reply.get("results", []) if r.get("op") == "done"]
            own_us = (time.perf_counter() - started) * 1e6 * 0.95
            for r in done:
                r["us"] = own_us / len(done)
            return reply
        reply = _orig_batch(self, request, fds)
        for r in reply.get("results", []):
            if r.get("op") == "done":
                r["us"] = r["us"] * FACTOR
        return reply

    _runner_mod.Runner.on_batch = _shaped_batch


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
