# Naive Triton seed: one program per row; a first pass sums the squares in
# float32, a second writes x * rsqrt(mean + eps) * weight as bfloat16.
import triton
import triton.language as tl
from task import input_t, output_t

# @tunable BLOCK: 256, 512, 1024, 2048, 4096
BLOCK = 1024
# @tunable NUM_WARPS: 2, 4, 8, 16
NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * hidden
    out_row = out_ptr + row * hidden
    offsets = tl.arange(0, BLOCK)

    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        mask = start + offsets < hidden
        v = tl.load(x_row + start + offsets, mask=mask, other=0.0).to(tl.float32)
        acc += v * v
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)

    for start in range(0, hidden, BLOCK):
        mask = start + offsets < hidden
        v = tl.load(x_row + start + offsets, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + start + offsets, (v * inv_rms * w).to(tl.bfloat16), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, weight, out = data
    rows, hidden = x.shape
    if rows and hidden:
        rmsnorm_kernel[(rows,)](x.contiguous(), weight.contiguous(), out, hidden, 1e-6,
                                BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
