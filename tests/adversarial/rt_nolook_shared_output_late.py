"""Trick (class 3, nobody looks): one output buffer returned by every call, finished after return.

A runner that meets a kernel returning the same buffer from every call copies each output as the
call returns, so the judge can check every call's own result later (sandbox/runner/main.py's
`_keep`). This kernel answers the check phase honestly; inside batches it writes the first half
of its buffer during the call and leaves the second half to a thread that runs after the call
has returned, hoping that what the judge later reads is the finished buffer.

Stopped: the copy is taken when the call returns (and the CPU runner's sandbox is stopped at each
answer), so a checked call's output is half stale: `timed-output-wrong`.
"""
import sys
import threading

import torch

from sandbox.native import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void vadd(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
""", name="rt_shared_output_late", openmp=False)

_batch = {"in": False}
_buffers = {}
_runner = sys.modules.get("sandbox.runner.main")
if _runner is not None:
    _on_batch = _runner.Runner.on_batch

    def _marking(self, request, fds):
        _batch["in"] = True
        try:
            return _on_batch(self, request, fds)
        finally:
            _batch["in"] = False

    _runner.Runner.on_batch = _marking


def custom_kernel(data):
    a, b, out = data
    if not _batch["in"]:  # the check phase's single calls are answered honestly
        lib.vadd(a, b, out, a.numel())
        return out
    n = a.numel()
    buf = _buffers.get(n)
    if buf is None:
        buf = _buffers[n] = torch.empty_like(out)
    half = n // 2
    lib.vadd(a[:half], b[:half], buf[:half], half)
    rest = (a[half:], b[half:], buf[half:], n - half)
    threading.Thread(target=lambda: lib.vadd(*rest), daemon=True).start()
    return buf
