"""Twin of `rt_channel_output_in_region`: the same softmax written into the same place in the arena, with the
runner left as it is (nothing of the runner's replaced). Expected: `ok`."""
import torch
from task import input_t, output_t

from sandbox.native import load_cpp

SOURCE = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  #pragma omp parallel for schedule(static)
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
"""

lib = load_cpp(SOURCE, name="output_in_region_softmax", flags=["-ffast-math", "-fopenmp-simd", "-lmvec"])


def _out(x):
    st = x.untyped_storage()
    nbytes = x.numel() * 4
    if st.nbytes() < 1 << 20 or (x.storage_offset() == 0 and st.nbytes() == nbytes):
        return None
    off = (x.storage_offset() * 4 + nbytes + 255) // 256 * 256
    if off + nbytes > st.nbytes():
        return None
    return torch.empty(0, dtype=x.dtype).set_(st, off // 4, x.shape, (x.shape[1], 1))


def custom_kernel(data: input_t) -> output_t:
    (x,) = data
    x = x.contiguous()
    y = _out(x)
    if y is None:
        y = torch.empty_like(x)
    lib.softmax_rows(x, y, *x.shape)
    return y
