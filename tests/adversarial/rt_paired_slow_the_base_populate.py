"""Cheat against paired timing, with work no stop signal halts and no process inherits: after each of
its batches the runner clone()s a child the kernel reaps itself (SIGCHLD ignored), which asks the
kernel to populate a fresh region of memory (madvise MADV_POPULATE_WRITE): the zeroing runs on
inside the system call after the judge stops the sandbox, beside the base timed next, and the
child's CPU time leaves with it. Reading each process from /proc never sees it; the runner's control
group is charged as it runs (sandbox/judge/cgroups.py). Found by a red-team helper on 2026-11-25.
Expected: rejected (work-after-return), or no faster than its twin."""
import ctypes
import signal
import sys
import time

from sandbox.native import load_cpp

lib = load_cpp(r'''
#include <cstdint>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
extern "C" void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
static char stack[64 * 1024];
static long bytes_to_touch;
static volatile int inside = 0;
static int toucher(void*) {
  void* p = mmap(0, (size_t)bytes_to_touch, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  __atomic_store_n(&inside, 1, __ATOMIC_RELEASE);
  if (p != MAP_FAILED) { madvise(p, (size_t)bytes_to_touch, 23 /* MADV_POPULATE_WRITE */); munmap(p, (size_t)bytes_to_touch); }
  __atomic_store_n(&inside, 0, __ATOMIC_RELEASE);
  return 0;
}
extern "C" int touch_behind(long bytes) {
  bytes_to_touch = bytes;
  return clone(toucher, stack + sizeof(stack), CLONE_VM | CLONE_FS | CLONE_FILES | SIGCHLD, nullptr);
}
extern "C" int touching() { return __atomic_load_n(&inside, __ATOMIC_ACQUIRE); }
''', name="rt_paired_slow_the_base_populate", openmp=False)

signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the child: its CPU time goes nowhere
_raw = ctypes.CDLL(str(lib.path))
_raw.touch_behind.argtypes = [ctypes.c_long]
TOUCH_BYTES = 512 << 20  # about 50-150 ms of zeroing on the hosts seen

_runner_mod = sys.modules.get("sandbox.runner.main")
if _runner_mod is not None:
    _orig_batch = _runner_mod.Runner.on_batch

    def _batch_then_touch(self, request, fds):
        reply = _orig_batch(self, request, fds)
        if request.get("kernel") != "noop" and not _raw.touching():
            _raw.touch_behind(TOUCH_BYTES)
            deadline = time.perf_counter() + 0.005
            while not _raw.touching() and time.perf_counter() < deadline:
                pass
        return reply

    _runner_mod.Runner.on_batch = _batch_then_touch


def custom_kernel(data):
    a, b, out = data
    lib.add(a, b, out, a.numel())
    return out
