"""Trick (class 6, persist): a double-forked, setsid() daemon that outlives the candidate.

At import: fork, setsid() in the child, fork again, and the grandchild exec's a Python that
sleeps in a loop with the marker ks_rt_persist_daemon in its command line (so a later probe
can find it in /proc). It also ignores SIGHUP/SIGTERM. The kernel is an honest native
a + b; the daemon must be gone once the evaluation ends.
"""
import os
import sys

from sandbox.native import load_cpp

MARK = "ks_rt_persist_daemon"
SCRIPT = ("import signal, time\n"
          "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
          "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "time.sleep(600)\n")

try:
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.closerange(3, 1024)
                os.execv(sys.executable, [sys.executable, "-c", SCRIPT, MARK])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    import time
    time.sleep(0.2)
    alive = [p for p in os.listdir("/proc") if p.isdigit() and MARK.encode() in open(f"/proc/{p}/cmdline", "rb").read()]
    sys.stderr.write(f"rt_persist_daemon: daemon pids (runner's namespace) {alive}\n")
except OSError as exc:
    sys.stderr.write(f"rt_persist_daemon: fork failed: {exc}\n")

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_persist_vadd", openmp=False)


def custom_kernel(data):
    a, b, out = data
    lib.vadd(a, b, out, a.numel())
    return out
