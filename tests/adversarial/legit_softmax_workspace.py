"""Legitimate: two native passes and a per-shape workspace reused across calls.

Only scratch space is cached, never results: every call recomputes from its inputs.
"""
import torch

from sandbox.native import load_cpp

lib = load_cpp(r'''
#include <cmath>
#include <cstdint>
extern "C" void row_stats(const float* x, float* stats, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols; float m = -INFINITY, s = 0.f;
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[c]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp(in[c] - m);
    stats[2 * r] = m; stats[2 * r + 1] = s;
  }
}
extern "C" void normalise(const float* x, const float* stats, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = std::exp(x[r * cols + c] - stats[2 * r]) / stats[2 * r + 1];
}
''', name="twopass", openmp=False)
_workspace = {}


def custom_kernel(data):
    (x,) = data
    rows, cols = x.shape
    stats = _workspace.get(rows)
    if stats is None:
        stats = _workspace[rows] = torch.empty(2 * rows, dtype=torch.float32)
    y = torch.empty_like(x)
    lib.row_stats(x, stats, rows, cols)
    lib.normalise(x, stats, y, rows, cols)
    return y
