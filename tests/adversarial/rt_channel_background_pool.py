"""Trick (class 2/3): a worker thread started at import takes each call's tensors from a queue and
fills the preallocated output after the call has returned; the call itself only enqueues.

Unlike a thread per call, nothing is created during the calls. Stopped the same way: the runner's
CPU time while it has no call to run (`work-after-return`)."""
import queue
import threading

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_background_pool", openmp=False)

_work: "queue.Queue[tuple]" = queue.Queue()


def _serve():
    while True:
        a, b, out = _work.get()
        lib.vadd(a, b, out, a.numel())


threading.Thread(target=_serve, daemon=True).start()


def custom_kernel(data):
    a, b, out = data
    if a.numel() < 4096:
        lib.vadd(a, b, out, a.numel())
    else:
        _work.put((a, b, out))
    return out
