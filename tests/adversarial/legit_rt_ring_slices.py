# Legitimate (softmax): after a per-shape "autotune" phase of 24 calls with fresh outputs, each output is a
# distinct slice of one persistent workspace (a ring of 32 slots, so no output is reused for 32 calls, more
# than a batch holds). No output is ever overwritten while the judge holds it: nothing to copy, nothing to refuse.
import torch
from task import input_t, output_t
from sandbox.native import load_cpp

SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
  #pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * cols;
    float* out = y + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) mx = in[c] > mx ? in[c] : mx;
    float total = 0.0f;
    for (int64_t c = 0; c < cols; ++c) { float e = std::exp(in[c] - mx); out[c] = e; total += e; }
    const float inv = 1.0f / total;
    for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
  }
}
"""
lib = load_cpp(SOURCE, name="softmax")
RING, TUNE = 32, 24
_state = {}

def custom_kernel(data: input_t) -> output_t:
    (x,) = data
    x = x.contiguous()
    rows, cols = x.shape
    st = _state.setdefault((rows, cols), {"n": 0, "ws": None})
    st["n"] += 1
    if st["n"] <= TUNE:
        y = torch.empty_like(x)
    else:
        if st["ws"] is None:
            st["ws"] = torch.empty((RING, rows, cols), dtype=x.dtype)
        y = st["ws"][st["n"] % RING]
    lib.softmax_rows(x, y, rows, cols)
    return y
