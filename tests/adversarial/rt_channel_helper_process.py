"""Trick (class 2/3) against the idle-CPU bound: a helper process forked at import, which the runner
never waits for, fills the preallocated output after the call has returned. The call only writes
three addresses to a pipe; the arena is shared memory, so the helper's writes reach the judge.

A process's CPU time is not in its parent's until the parent waits for it, so a bound on the
runner's own time misses it. Stopped by counting every process in the runner's sandbox
(sandbox/judge/procs.py): `work-after-return`, or a wrong output when the helper is late."""
import os
import struct

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd_at(uint64_t a, uint64_t b, uint64_t out, int64_t n) {
  const float* x = (const float*)a; const float* y = (const float*)b; float* z = (float*)out;
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
""", name="rt_helper_process", openmp=False)

_read, _write = os.pipe()
if os.fork() == 0:  # the helper: serves addresses until the runner's sandbox goes
    os.close(_write)
    record = struct.calcsize("QQQq")
    while True:
        message = os.read(_read, record)
        if len(message) < record:
            os._exit(0)
        lib.vadd_at(*struct.unpack("QQQq", message))
os.close(_read)


def custom_kernel(data):
    a, b, out = data
    n = a.numel()
    if n < 1 << 20 or n & (n - 1):  # honest on the test shapes; benchmark sizes are powers of two
        lib.vadd_at(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel())
    else:
        os.write(_write, struct.pack("QQQq", a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel()))
    return out
