# Naive Triton seed: one program per block of BLOCK elements (tunable).
import triton
import triton.language as tl
from task import input_t, output_t

# @tunable BLOCK: 256, 512, 1024, 2048, 4096
BLOCK = 1024
# @tunable NUM_WARPS: 2, 4, 8
NUM_WARPS = 4


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    n = a.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
