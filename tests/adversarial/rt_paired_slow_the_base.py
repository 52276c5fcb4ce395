"""Cheat against paired timing: after each call returns, a thread burns the CPU for a while, so the
base (timed next, beside it) runs slower and the candidate looks faster. Expected: rejected
(work-after-return: CPU used while the runner had no call to run)."""
import threading
import time

from sandbox.native import load_cpp

lib = load_cpp(r'''
#include <cstdint>
extern "C" void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
''', name="rt_paired_slow_the_base", openmp=False)
_go = threading.Event()


def _burn():
    while True:
        _go.wait()
        _go.clear()
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass


threading.Thread(target=_burn, daemon=True).start()


def custom_kernel(data):
    a, b, out = data
    lib.add(a, b, out, a.numel())
    _go.set()
    return out
