"""Trick (class 2, channel) against the stop the judge puts the runner's sandbox in before it reads outputs:
16 helpers, each in a session of its own, are woken as each batch answer goes out and send SIGCONT to the
runner in a tight loop. Stopped one process after another, the runner was continued by a helper the judge
had yet to stop, and ran on while its outputs were read: the last call of each large batch returns its
output unwritten, and a thread of the runner fills it in after the answer (red-team round 30).

Stopped because the judge repeats its stop signals until one pass finds every thread of the sandbox stopped
(sandbox/judge/session.py's `_stop_all`); then none is left to continue another, the output stays unwritten
(`timed-output-wrong`), and a sandbox that keeps itself running is the runner's `protocol` error."""
import ctypes
import os
import sys
import threading
import time

import torch

from sandbox.native import load_cpp

FRAC = 1.0  # of the last call's rows (batches of 8 or more: 512x1024) left for after the answer
SPAM_NS = 10_000_000
DELAY_S = 0.0

SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float mx = -INFINITY;
    #pragma omp simd reduction(max:mx)
    for (int64_t c = 0; c < cols; ++c) mx = in[c] > mx ? in[c] : mx;
    float total = 0.0f;
    #pragma omp simd reduction(+:total)
    for (int64_t c = 0; c < cols; ++c) { float e = expf(in[c] - mx); out[c] = e; total += e; }
    const float inv = 1.0f / total;
    #pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
#include <csignal>
#include <ctime>
extern "C" void spam_cont(int64_t pid, int64_t ns) {
  timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    kill((pid_t)pid, SIGCONT);
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < ns);
}
"""
lib = load_cpp(SOURCE, name="rt_sigcont_softmax", flags=["-ffast-math", "-fopenmp-simd", "-lmvec"], openmp=False)

_state = {"in": False, "n": 0, "size": 0}
_jobs: list = []
_go = threading.Event()

# The helpers: each in a session of its own, woken through a pipe, SIGCONT the runner in a tight loop (C) until
# they are stopped themselves; the judge stops them one by one after the runner.
HELPERS = 16
_r, _w = os.pipe()
_runner = os.getpid()
for _ in range(HELPERS):
    if os.fork() == 0:
        try:
            os.close(_w)
            os.setsid()
            while True:
                try:
                    b = os.read(_r, 1)
                except InterruptedError:
                    continue
                if not b:
                    break
                lib.spam_cont(_runner, SPAM_NS)
        except BaseException:
            pass
        os._exit(0)
os.close(_r)


def _worker():
    while True:
        _go.wait()
        _go.clear()
        if DELAY_S:
            time.sleep(DELAY_S)
        while _jobs:
            x, y, rows, cols = _jobs.pop(0)
            lib.softmax_rows(x, y, rows, cols)


threading.Thread(target=_worker, daemon=True).start()

_rm = sys.modules.get("sandbox.runner.main")
_proto = sys.modules.get("sandbox.shared.protocol")
if _rm is not None and _proto is not None:
    _orig_batch = _rm.Runner.on_batch

    def on_batch(self, request, fds):
        _state.update({"in": True, "n": 0, "size": len(request.get("calls") or [])})
        try:
            return _orig_batch(self, request, fds)
        finally:
            _state["in"] = False

    _rm.Runner.on_batch = on_batch
    import gc as _gc
    _gc.collect = lambda *a, **k: 0  # the runner's collection after each answer would take a core from the worker
    _orig_send = _proto.send

    def send(sock, message, fds=None):
        if isinstance(message, dict) and message.get("op") == "batch_done":
            os.write(_w, b"x" * HELPERS)  # the helpers start their SIGCONTs
            if _jobs:
                _go.set()  # the deferred calls are filled in after the answer
        return _orig_send(sock, message, fds)

    _proto.send = send


def custom_kernel(data):
    (x,) = data
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    if _state["in"] and FRAC:
        k = _state["n"]
        _state["n"] += 1
        last = k == _state["size"] - 1 and _state["size"] >= 8  # the call the judge verifies last, on 512x1024
        later = int(rows * FRAC + 0.5) if last else 0
        if later:
            lib.softmax_rows(x, y, rows - later, cols)
            _jobs.append((x[rows - later:], y[rows - later:], later, cols))
            return y
    lib.softmax_rows(x, y, rows, cols)
    return y
