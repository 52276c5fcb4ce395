"""Cheat against paired timing, from another process: a helper forked at import, never waited for,
burns the CPU for a while after each call returns, so the base (timed next, beside it) runs slower
and the candidate looks faster. A thread would be in the runner's CPU time; a process is not,
until somebody waits for it. Expected: rejected (work-after-return: every process of the runner's
sandbox is on the judge's books)."""
import os
import time

from sandbox.native import load_cpp

lib = load_cpp(r'''
#include <cstdint>
extern "C" void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
''', name="rt_paired_slow_the_base_process", openmp=False)

_read, _write = os.pipe()
if os.fork() == 0:
    os.close(_write)
    while os.read(_read, 1):
        end = time.perf_counter() + 0.02
        while time.perf_counter() < end:
            pass
    os._exit(0)
os.close(_read)


def custom_kernel(data):
    a, b, out = data
    lib.add(a, b, out, a.numel())
    os.write(_write, b"x")
    return out
