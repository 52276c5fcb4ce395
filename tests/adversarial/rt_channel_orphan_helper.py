"""Trick (class 2/3) against the idle-CPU bound, escaping the runner's own process tree: at import
a child forks a grandchild and exits, the grandchild leaves the runner's session (`setsid`) and is
adopted by whatever reaps orphans (the sandbox's first process, or the judge); it then fills each
benchmark call's preallocated output after the call returned, fed through a pipe of addresses.

Neither the runner's CPU time nor the tree below the runner holds its work. Stopped by counting
every process of the sandbox, however it got there (sandbox/judge/procs.py): `work-after-return`,
or a wrong output when the helper is late."""
import os
import struct

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd_at(uint64_t a, uint64_t b, uint64_t out, int64_t n) {
  const float* x = (const float*)a; const float* y = (const float*)b; float* z = (float*)out;
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}
""", name="rt_orphan_helper", openmp=False)

_read, _write = os.pipe()
_child = os.fork()
if _child == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)  # the grandchild is now an orphan in a session of its own
    os.close(_write)
    record = struct.calcsize("QQQq")
    while True:
        message = os.read(_read, record)
        if len(message) < record:
            os._exit(0)
        lib.vadd_at(*struct.unpack("QQQq", message))
os.waitpid(_child, 0)  # reaped at once: nothing of the helper stays below the runner
os.close(_read)


def custom_kernel(data):
    a, b, out = data
    n = a.numel()
    if n < 1 << 20 or n & (n - 1):  # honest on the test shapes; benchmark sizes are powers of two
        lib.vadd_at(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel())
    else:
        os.write(_write, struct.pack("QQQq", a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel()))
    return out
